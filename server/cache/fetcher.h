// The reader stage's cache hierarchy: a sample's encoded bytes come from L1
// (RAM), else L2 (LMDB on local disk, validated against the source file's
// size and mtime), else the dataset's SampleSource (sample_source.h), and
// are then put into L1 and queued for L2.
//
// A key not `proven` (SourceKey) is never served from a cache: it is read
// from the source, which proves it, and kept as any read is; a fetch of it
// through the same source (one per session: the same proof) while such a
// read is in flight joins that read, and one that finds the source proven
// by a read that ended since its key was identified is served as a proven
// key is.
//
// Fetch blocks on I/O, so it runs on the reader pool, never on decode
// threads. Concurrent fetches of one key share a single source read
// ("joined" reads), so ranks reading the same data read it once.
// Thread-safe; the caches and file system must outlive the fetcher.
#ifndef STOKER_SERVER_CACHE_FETCHER_H_
#define STOKER_SERVER_CACHE_FETCHER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "proto/stoker.pb.h"
#include "server/cache/cache.h"
#include "server/dataset/dataset.h"
#include "server/access/memory_budget.h"
#include "server/cache/l2_cache.h"
#include "server/dataset/sample_source.h"

namespace stoker {

class SampleFetcher {
 public:
  // `l2` may be null (no L2). `in_flight` (may be null: unbounded) is
  // charged a file's size (as identified) before its source is read, for
  // the fetching owner (MemoryBudget::Wait: a read waits for room, at most
  // kReadRoomWait), and given back when the read ends; a file larger than
  // its total, or that finds no room in time, is RESOURCE_EXHAUSTED,
  // unread, and one whose dataset's reads_cancel is raised while it waits
  // is CANCELLED. A shard's member is charged its own bytes
  // (SourceKey::read_bytes). Files over `max_file_bytes` are not charged: their sources
  // refuse them by that limit before reading (the daemon keeps the budget
  // at least that large).
  static constexpr absl::Duration kReadRoomWait = absl::Minutes(5);
  SampleFetcher(ShardedLruCache* l1, L2Cache* l2, int reader_threads,
                MemoryBudget* in_flight = nullptr, uint64_t max_file_bytes = UINT64_MAX);

  // The encoded bytes of one of a sample's files (Sample::file(k): a path,
  // or an LMDB key) from ds.source. The file is identified first through the
  // caller's confinement (SampleSource::Identify), so a cached copy is only
  // served to a caller that may open the file, and only for that version of
  // it; `known` (may be null) is that identity when the caller has it.
  // What the source gives is queued for L2 charged to `owner` (the
  // session's uid; L2Cache::kNobody for the daemon's own reads); of
  // concurrent fetches sharing one read, the one that reads is charged.
  // Errors are the source's (NOT_FOUND, ...); an empty source file is
  // DATA_LOSS "file is empty" unless its source says it is data
  // (SampleSource::EmptyIsData: a shard's kept member). Nothing failed is cached. `*from_source`
  // (optional) tells whether the source was read. `charged`: the caller
  // holds the file's room among the bytes in flight already (Charge), so
  // a read takes none of its own.
  absl::StatusOr<Bytes> Fetch(const Dataset& ds, const std::string& path, int64_t owner,
                              bool* from_source = nullptr,
                              const SourceKey* known = nullptr, bool charged = false);

  // A read ahead of any session's (the cache warmer's): `path` fetched as
  // `owner` unless L1 holds it, its room among the bytes in flight taken
  // before it may lead a read. A session's fetch that joins it (holding its own sample's room)
  // then never waits on a leader that waits for room that fetch holds.
  absl::Status Warm(const Dataset& ds, const std::string& path, int64_t owner,
                    bool* from_source);

  // Keeps the bytes of `id` as a read is kept: in L1, and (`l2`: a
  // versioned source's) queued for L2 charged to `owner`. Reads keep what
  // they read; a source keeps what it read ahead of any fetch (a shard
  // read whole to index it).
  void Keep(const SourceKey& id, Bytes bytes, int64_t owner, bool l2 = true);

  // Room among the bytes in flight for `owner`'s files `ids`, read (or
  // from a cache) and held until the caller drops the token (the decode
  // stage: what waits for it is bounded as reads are), waited for as a
  // read waits: one request for their sum (several files: at most the
  // whole budget), so a sample larger than its user's share runs alone
  // rather than waiting for itself. A file over `max_file_bytes` is not
  // charged (its source refuses it). A token (null without a budget), else CANCELLED or
  // RESOURCE_EXHAUSTED naming `what`. Fetch them with `charged`.
  absl::StatusOr<std::shared_ptr<void>> Charge(const Dataset& ds, int64_t owner,
                                               const std::vector<SourceKey>& ids,
                                               absl::string_view what);

  // ds.source->Identify(path), counted in the reader's stats (an open when
  // it opened the file, not for one the session proved lately; a read
  // error when it fails); a miss then reads from the same open.
  absl::StatusOr<SourceKey> Identify(const Dataset& ds, const std::string& path);

  v1::ReaderStats Stats() const;

 private:
  struct Inflight {
    absl::Notification done;
    absl::StatusOr<Bytes> result;
  };
  // The result of `read`, one at a time per `flight_key`: a fetch that
  // finds one in flight waits for it (a joined read). `cached`: L1 first
  // (`flight_key` is the cache key). `*from_source`: the leader's own.
  // `rejoin`: a joined fetch whose leader's read failed (perhaps for the
  // leader's own session, user, rights or client, not this caller's)
  // tries once more, as itself.
  absl::StatusOr<Bytes> Shared(const std::string& flight_key, bool cached,
                               const std::string& path, bool* from_source,
                               const std::function<absl::StatusOr<Bytes>(bool*)>& read,
                               bool rejoin = true);
  // L2, else ReadAndKeep.
  absl::StatusOr<Bytes> Load(const Dataset& ds, const std::string& path,
                             const SourceKey& id, int64_t owner, bool* read_source,
                             bool charged);
  // The source's bytes, then kept in L1 and L2 under `id` when still that
  // version.
  absl::StatusOr<Bytes> ReadAndKeep(const Dataset& ds, const std::string& path,
                                    const SourceKey& id, int64_t owner, bool* read_source,
                                    bool charged);
  // The file `id` names, from the descriptor it was identified from;
  // charged for its read unless `charged`.
  absl::StatusOr<Bytes> ReadSource(const Dataset& ds, const std::string& path,
                                   const SourceKey& id, int64_t owner, FileVersion* version,
                                   bool charged);

  ShardedLruCache* const l1_;
  L2Cache* const l2_;
  const int reader_threads_;
  MemoryBudget* const in_flight_;
  const uint64_t max_file_bytes_;

  std::atomic<uint64_t> reads_{0}, read_bytes_{0}, read_errors_{0};
  std::atomic<uint64_t> stats_{0}, joined_{0};
  std::atomic<uint64_t> read_ns_total_{0}, read_ns_max_{0};

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Inflight>> inflight_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_SERVER_CACHE_FETCHER_H_
