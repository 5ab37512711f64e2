// What every session of a daemon shares: the reader pool and the decode
// pools (one per NUMA node), the caches (L1, L2, decoded val samples,
// pixels, decoded volumes), the fetcher that reads through them, cache
// warming, the daemon-wide counters, and the per-user budgets that
// sources charge (array RAM, sample lists, held files).
//
// Lifecycle: construct, Start() (makes the pools, opens L2), then any
// number of sessions use Context() and OpenDataset() from any thread;
// Stop() ends background work; the destructor drains the pools and L2's
// queued writes. Every method is thread-safe; pools() and reader() are
// valid after Start().
#ifndef STOKER_SERVER_DAEMON_ENGINE_H_
#define STOKER_SERVER_DAEMON_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/stoker.pb.h"
#include "server/access/file_system.h"
#include "server/access/memory_budget.h"
#include "server/cache/cache.h"
#include "server/cache/cache_warmer.h"
#include "server/cache/fetcher.h"
#include "server/cache/l2_cache.h"
#include "server/cache/pixel_cache.h"
#include "server/cache/pixel_shares.h"
#include "server/objstore/s3_client.h"
#include "server/cache/volume_cache.h"
#include "server/daemon/options.h"
#include "server/dataset/dataset.h"
#include "server/pool/background_work.h"
#include "server/pool/idle_work.h"
#include "server/pool/node_pools.h"
#include "server/pool/thread_pool.h"
#include "server/serve/session.h"
#include "util/cancellation.h"
#include "util/weak_list.h"

namespace stoker {

class KeptValues;  // server/sources/source.h

class Engine {
 public:
  // `options` must outlive the engine.
  explicit Engine(const DaemonOptions& options);
  ~Engine();

  // The decode pools' nodes (hand-made, the machine's, or one unpinned
  // pool), L2, the reader pool and the warmer. INVALID_ARGUMENT for a bad
  // numa_topology; L2's error when it cannot be opened.
  absl::Status Start();
  // The daemon is stopping: scans in progress give up, and every dataset's
  // reads_cancel is raised (a session's, and an opening's in progress, whose
  // object store requests and waits for room then end at once), as is that
  // of every dataset opened from now on.
  void CancelScans();
  // Ends background work (idle volume fills, warm-ups) once no session is
  // left to run it. Idempotent.
  void Stop();

  // What a session on `node` owned by `uid` runs with.
  PipelineContext Context(int node, int64_t uid, uint64_t generation);
  // Opens `spec`'s dataset for a caller confined `beneath` (null: anywhere)
  // whose RAM, lists and held files are charged to `uid` (-1: an admin,
  // bound only by the totals), reaching object stores with `access` (the
  // caller's; null: none), counting what it lists and reads in `progress`
  // (null: nowhere). Scans give up once CancelScans() is called.
  // `streamed`: ScanLimits::streamed. Its object reads end when its
  // reads_cancel is raised (by its session's Stop).
  absl::StatusOr<std::shared_ptr<const Dataset>> OpenDataset(
      const v1::DatasetSpec& spec, std::shared_ptr<Beneath> beneath, int64_t uid,
      std::shared_ptr<const ObjectStoreAccess> access = nullptr,
      std::shared_ptr<OpeningProgress> progress = nullptr, bool streamed = false);
  // The daemon's own files, folders and file systems, that no caller may
  // read (FileGuard): L2's, the handoff socket's folder, /dev/shm.
  std::shared_ptr<const FileGuard> Guard() const;

  // Caches, counters and volume stats into `s` (pools are the
  // controller's).
  void AddStats(v1::DaemonStats* s) const;

  NodePools& pools() { return *decode_pools_; }
  const NodePools* pools_or_null() const { return decode_pools_.get(); }
  ThreadPool& reader() { return *reader_pool_; }
  const ThreadPool* reader_or_null() const { return reader_pool_.get(); }
  CacheWarmer* warmer() { return warmer_.get(); }
  const CacheWarmer* warmer() const { return warmer_.get(); }
  L2Cache* l2() { return l2_.get(); }
  const std::string& numa() const { return numa_; }  // DaemonStats.numa.

 private:
  ScanLimits ScanLimitsNow();

  const DaemonOptions& options_;
  PipelineCounters counters_;
  ShardedLruCache l1_;
  ShardedLruCache decoded_cache_;
  ShardedLruCache pixel_ram_;
  PixelShares pixel_shares_;  // Who keeps exact pictures in pixel_ram_.
  IdleWork idle_;        // Background fills of volumes_ (outlives its hook's use).
  VolumeCache volumes_;  // Decodes on the decode pools once Start made them.
  MemoryBudget array_ram_;   // Array sources' RAM, per user.
  MemoryBudget list_ram_;    // Sample lists' RAM, per user.
  MemoryBudget held_files_;  // Files sources keep open or mapped, per user.
  MemoryBudget reads_in_flight_;  // Bytes being read, or waiting for decodes, per user.
  MemoryBudget decodes_in_flight_;  // Large pictures being decoded, per user.
  std::unique_ptr<L2Cache> l2_;
  std::unique_ptr<KeptValues> kept_;  // Sources' kept values, in l2_.
  std::unique_ptr<PixelCache> pixels_;
  std::unique_ptr<SampleFetcher> fetcher_;
  std::unique_ptr<ThreadPool> reader_pool_;
  std::unique_ptr<CacheWarmer> warmer_;  // Reads on reader_pool_ via fetcher_.
  // Streamed openings' indexing; joined by Stop, before what it uses goes.
  BackgroundWork background_;
  std::unique_ptr<NodePools> decode_pools_;
  // Object stores (null: --object-store-endpoints lists none).
  std::unique_ptr<S3Client> objects_;
  std::string numa_;
  std::atomic<bool> stopping_{false};  // Folder scans in progress give up.
  absl::Mutex cancels_mu_;
  // Every dataset's reads_cancel (CancelScans raises them).
  WeakList<Cancellation> cancels_ ABSL_GUARDED_BY(cancels_mu_);
};

}  // namespace stoker

#endif  // STOKER_SERVER_DAEMON_ENGINE_H_
