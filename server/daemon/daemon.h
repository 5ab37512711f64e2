// The daemon's core service, free of gRPC (grpc_service.h adapts it): the
// session table, the shared reader and decode pools, the caches (L1, L2,
// decoded), warm-up jobs, and the reaper that reclaims the rings of clients
// that vanished.
//
// Lifecycle: construct, Start(), serve calls from any thread, Stop() (which
// refuses new sessions, closes every session with kClosedByShutdown and
// joins the reaper). Every public method is thread-safe. Sessions are closed
// outside mu_ because ServingSession::Stop waits for in-flight decode tasks.
#ifndef STOKER_SERVER_DAEMON_DAEMON_H_
#define STOKER_SERVER_DAEMON_DAEMON_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "proto/stoker.pb.h"
#include "server/access/authorizer.h"
#include "server/cache/cache.h"
#include "server/cache/cache_warmer.h"
#include "server/dataset/dataset.h"
#include "server/cache/fetcher.h"
#include "server/pool/load_monitor.h"
#include "server/cache/l2_cache.h"
#include "server/access/memory_budget.h"
#include "server/pool/node_pools.h"
#include "server/serve/session.h"
#include "server/cache/volume_cache.h"

namespace stoker {

// Decode pools per NUMA node: auto = one per node when there are several.
enum class NumaMode { kAuto, kOn, kOff };

struct DaemonOptions {
  int decode_threads = 0;  // 0: one per online core.
  NumaMode numa = NumaMode::kAuto;
  // Hand-made nodes ("0-3;4-7", server/pool/topology.h) instead of the
  // machine's; decode pools per node then whatever `numa` says.
  std::string numa_topology;
  // Sessions may use other nodes' idle decode threads.
  bool numa_spill = true;
  // Where GPUs' NUMA nodes are read (/sys/bus/pci/devices/...); tests
  // point it at a tree of their own.
  std::string sysfs = "/sys";
  int reader_threads = 64;  // Outstanding source reads.
  uint64_t l1_bytes = 2ULL << 30;
  uint64_t decoded_cache_bytes = 1ULL << 30;
  uint64_t pixel_cache_bytes = 2ULL << 30;  // SessionSpec.pixel_cache's RAM.
  // Decoded chunked or compressed volumes (HDF5 volume folders), shared.
  uint64_t volume_cache_bytes = 4ULL << 30;
  // RAM array sources may hold (RAM copies of files, datasets read whole)
  // is charged against l1_bytes in all and this per non-admin user (0: only
  // the total binds); past either they read from their mappings.
  uint64_t max_array_bytes_per_user = 0;
  // RAM one non-admin user's open datasets' sample lists (paths, names)
  // may take together; a dataset whose list would pass it is
  // RESOURCE_EXHAUSTED while it is being built.
  uint64_t max_list_bytes_per_user = 4ULL << 30;
  // Files one non-admin user's sources may keep open or mapped together
  // (each is one of the daemon's descriptors or maps); all users together:
  // three quarters of the daemon's descriptor limit and of
  // vm.max_map_count, whichever is lower.
  uint64_t max_open_files_per_user = 16384;
  L2Options l2;  // l2.path empty: no L2.
  // Autotune: resize the decode pool within [1, max_decode_threads] and the
  // reader pool within [reader_threads, max_reader_threads] from the
  // sessions' diagnoses.
  bool autotune = false;
  int max_decode_threads = 0;  // 0: online cores.
  int max_reader_threads = 256;
  // Ring segments are labelled "<shm_prefix><session>" (memory files with
  // no name in the file system; /proc/<pid>/maps shows the label).
  std::string shm_prefix = "stoker.";
  FileSystem* fs = nullptr;  // nullptr: FileSystem::Default().
  // The largest file read whole (a sample's file, a manifest).
  uint64_t max_file_bytes = kDefaultMaxFileBytes;
  DecodeLimits decode_limits;  // Per image: pixels, scans, memory.
  ScanLimits scan_limits;      // Per folder scan (cancel: set by Stop()).
  // All rings together (bytes; 0: no limit), one non-admin user's rings
  // (0: no limit) and sessions per non-admin user (0: no limit), opening
  // ones included; checked before a ring is allocated.
  uint64_t max_ring_bytes = 0;
  uint64_t max_ring_bytes_per_user = 0;
  uint32_t max_sessions_per_user = 0;
  // A session whose client never attaches (Attach) within this is closed
  // and its ring reclaimed; zero: never.
  absl::Duration attach_timeout = absl::Seconds(60);
  // Group whose members are admins (besides the daemon's own user);
  // -1: none.
  int64_t admin_gid = -1;
  // Socket path the ring handoff listens on (server/daemon/ring_handoff.h), told
  // to clients in OpenSessionResponse; empty: only this process can take
  // rings (HandOffRing), as in-process tests do.
  std::string handoff_socket;
  absl::Duration reap_interval = absl::Milliseconds(250);
};

class Daemon {
 public:
  explicit Daemon(DaemonOptions options);
  ~Daemon();  // Stop().

  // Removes rings orphaned by a previous daemon, starts the decode pools
  // (per NUMA node) and the reaper. FAILED_PRECONDITION if called twice;
  // INVALID_ARGUMENT for a bad numa_topology.
  absl::Status Start();
  void Stop();

  // Every call below takes its caller; the session belongs to the caller's
  // uid. With a handoff socket configured, callers must be authenticated
  // (authorizer().Authenticate) by the adapter; without one (in-process use) everyone
  // is the default admin caller.
  absl::StatusOr<v1::OpenSessionResponse> OpenSession(
      const v1::OpenSessionRequest& request, const Caller& caller = Caller());

  // Registers the control stream of a session. `on_close` runs once, on an
  // arbitrary thread, when the daemon closes the session (CloseSession,
  // shutdown, reaper). NOT_FOUND for an unknown session,
  // FAILED_PRECONDITION when another stream is attached, PERMISSION_DENIED
  // for another user's session.
  absl::Status Attach(uint64_t session_id, std::function<void()> on_close,
                      const Caller& caller = Caller());
  // The attached stream is finished: forget its callback. If the client side
  // ended it (`client_gone`), the session is closed and its ring reclaimed.
  void Detach(uint64_t session_id, bool client_gone);

  // The ring of `session_id` as a new descriptor for a client presenting
  // the session's handoff token (the caller sends it and closes it). The
  // first peer's uid becomes the session's owner; later requests must come
  // from the same uid. The peer's pid (SO_PEERCRED, as this daemon sees it)
  // becomes the pid watched for the client's death. PERMISSION_DENIED for a
  // wrong token or uid, NOT_FOUND for an unknown session.
  absl::StatusOr<int> HandOffRing(uint64_t session_id, const std::string& token,
                                  uid_t peer_uid, pid_t peer_pid);

  // PERMISSION_DENIED unless the caller owns the session or is an admin.
  absl::Status CloseSession(uint64_t session_id, const Caller& caller = Caller());
  // Other users' sessions are listed without their dataset and pid unless
  // the caller is an admin.
  v1::DaemonStats GetStats(const Caller& caller = Caller()) const;
  std::vector<v1::SessionStats> ListSessions(const Caller& caller = Caller()) const;
  // The files behind dataset indices of a session: its owner or an admin.
  absl::StatusOr<v1::DescribeSamplesResponse> DescribeSamples(
      const v1::DescribeSamplesRequest& request, const Caller& caller = Caller());
  // Admins only (PERMISSION_DENIED otherwise), like WarmCache.
  absl::StatusOr<v1::ResizePoolResponse> ResizePool(
      const v1::ResizePoolRequest& request, const Caller& caller = Caller());

  // Tokens, admins and the roots confined callers prove (the ring
  // handoff adapter issues and registers them; the gRPC adapter
  // authenticates with them).
  Authorizer& authorizer() { return auth_; }
  // Recorded for stats only (the /metrics exporter lives outside the core).
  void SetMetricsPort(int port) { metrics_port_.store(port); }

  // Starts warming a dataset's encoded samples into L1/L2 in the
  // background with at most `concurrency` reads at once.
  absl::StatusOr<v1::WarmCacheResponse> WarmCache(
      const v1::WarmCacheRequest& request, const Caller& caller = Caller());
  // Waits for every warm job to finish (tests, benchmarks).
  void WaitForWarmJobs();
  L2Cache* l2() { return l2_.get(); }
  int decode_threads() const;  // Over all nodes.
  // The decode pools, after Start().
  const NodePools& decode_pools() const { return *decode_pools_; }

 private:
  struct Entry {
    std::unique_ptr<ServingSession> session;
    std::function<void()> on_close;
    bool attached = false;
    bool pid_visible = false;  // The client pid could be checked at open.
    std::string handoff_token;  // Secret shown only to the opener.
    int64_t owner_uid = -1;     // Set when the ring is handed over.
    uint32_t peer_pid = 0;      // Likewise; 0: use the reported pid.
    int node = 0;               // Its decode pool's NUMA node,
    std::string placement;      // and why.
    absl::Time opened = absl::Now();
  };
  // Rings being allocated for OpenSessions in flight, counted against the
  // quotas until their sessions are in the table.
  struct Reservation {
    uint64_t id = 0;  // The session being opened.
    int64_t uid = -1;
    uint64_t bytes = 0;
  };
  // CheckQuotas, then counts `ring_bytes` for the session being opened
  // until Unreserve (under the same lock as the session's insertion).
  absl::Status Reserve(const Caller& caller, uint64_t session_id, uint64_t ring_bytes)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Unreserve(uint64_t session_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::StatusOr<std::shared_ptr<const Dataset>> LoadDataset(
      const v1::DatasetSpec& spec, const Caller& caller);
  // The daemon's own files, folders and file systems (FileGuard).
  std::shared_ptr<const FileGuard> MakeGuard() const;
  ScanLimits ScanLimitsNow() const;
  // Removes the entry (if present) and closes it; returns false if absent.
  bool Close(uint64_t session_id, shm::CloseReason reason, bool reclaimed);
  // `discard`: the client is gone; the ring's pages go back at once.
  void Finish(Entry entry, shm::CloseReason reason, bool discard = false);
  void ReapLoop();
  // One reaper tick: reports the counters to the LoadMonitor and carries
  // out its autotune decision.
  void ControlTick(uint64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::SessionStats EntryStats(const Entry& e) const;
  // EntryStats, without what `caller` may not see of another's session.
  v1::SessionStats VisibleStats(const Entry& e, const Caller& caller) const;
  // RESOURCE_EXHAUSTED when a new ring of `ring_bytes` would pass the
  // node-wide or the caller's ring budget, or the caller's session quota is
  // used up; sessions being opened (reserved_) count.
  absl::Status CheckQuotas(const Caller& caller, uint64_t ring_bytes) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const DaemonOptions options_;
  const uint64_t generation_;
  const absl::Time started_;
  Authorizer auth_;

  // Shared by all sessions; counters and error log are internally
  // synchronized, the pool is set in Start and destroyed in the destructor.
  PipelineCounters counters_;
  SampleErrorLog error_log_;
  ShardedLruCache l1_;
  ShardedLruCache decoded_cache_;
  ShardedLruCache pixel_ram_;
  IdleWork idle_;        // Background fills of volumes_ (outlives its hook's use).
  VolumeCache volumes_;  // Decodes on the decode pools once Start made them.
  MemoryBudget array_ram_;  // Array sources' RAM, per user.
  MemoryBudget list_ram_;   // Sample lists' RAM, per user.
  MemoryBudget held_files_;  // Files sources keep open or mapped, per user.
  std::unique_ptr<PixelCache> pixels_;  // Set in Start (after L2).
  std::unique_ptr<L2Cache> l2_;
  std::unique_ptr<SampleFetcher> fetcher_;
  std::unique_ptr<ThreadPool> reader_pool_;
  std::unique_ptr<CacheWarmer> warmer_;  // Reads on reader_pool_ via fetcher_.
  std::unique_ptr<NodePools> decode_pools_;
  std::string numa_;  // DaemonStats.numa.
  std::thread reaper_;
  absl::Notification stop_reaper_;

  mutable absl::Mutex mu_;
  bool started_flag_ ABSL_GUARDED_BY(mu_) = false;  // Start() was called.
  bool serving_ ABSL_GUARDED_BY(mu_) = false;       // Start() completed.
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<Reservation> reserved_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Entry> sessions_ ABSL_GUARDED_BY(mu_);
  uint64_t opened_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t closed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t reclaimed_ ABSL_GUARDED_BY(mu_) = 0;
  LoadMonitor monitor_ ABSL_GUARDED_BY(mu_);
  uint64_t autotune_changes_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int> metrics_port_{0};
  std::atomic<bool> stopping_scans_{false};  // Set first thing in Stop().
};

}  // namespace stoker

#endif  // STOKER_SERVER_DAEMON_DAEMON_H_
