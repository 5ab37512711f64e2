// L2: encoded samples in an LMDB environment on local disk (NVMe), shared
// by every session and surviving daemon restarts.
//
// Reads (Lookup) run on the caller's thread with a read-only transaction;
// writes are queued to one writer thread that commits them in batches, so
// a read never waits for a commit. Read your writes: the latest write of
// a key, queued or in the batch being committed, is served from memory to
// a Lookup of the same version (an L2 hit), until its batch is committed
// or dropped; so a sample read again before its write lands is not read
// from its source twice. The queue is bounded: when it is full,
// new writes are dropped and counted ("L2 writer queue full" is logged at
// most every 10 s). The map never fills for good: once its live pages pass
// 85 % of it, or a batch finds it full, entries are evicted until 70 % is
// in use, in key order from where the last sweep stopped, sparing once
// those hit since the sweep last passed them (CLOCK: least recently used
// first, without a write per hit). Only a value larger than what eviction
// can free is dropped (counted).
//
// Bytes are charged per owner: each value records the uid that wrote it
// (kNobody for the daemon's own writes), and the writer keeps each owner's
// bytes (the stored values' sizes) in memory, counted again from the
// values' headers when the environment is opened and kept up to date by
// every write, overwrite (the new owner takes the entry), delete and
// eviction. An owner's share is what the eviction keeps (the bytes held,
// with the incoming batch's, less those to free) divided among the owners
// holding any (kNobody is one of them). Eviction first takes only from
// owners over their share, in the sweep's order (sparing once, for at most
// two passes), until each is down to its share or enough is free; only
// when that frees too little does the sweep take from everyone. So a user
// writing past their share evicts their own entries, never those of a user
// within theirs.
//
// Each value carries its owner, the source file's size and mtime, its full
// key and a checksum: an entry for another version of the file is "stale"
// (a miss), one that fails its checksum is "corrupt" (counted, logged as
// "L2 cache decode failed", deleted, a miss). Values are written in the
// "SKL4" format; those of the earlier "SKL3" format (no owner) found in the
// environment are read as they are and charged to kNobody until they are
// overwritten or evicted. mdb_reader_check runs at open and periodically.
// Thread-safe; the destructor writes what is queued first.
#ifndef STOKER_SERVER_CACHE_L2_CACHE_H_
#define STOKER_SERVER_CACHE_L2_CACHE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/stoker.pb.h"
#include "util/buffer.h"
#include "server/cache/cache.h"
#include "server/access/file_system.h"
#include "server/cache/lmdb_env.h"

namespace stoker {

struct L2Options {
  std::string path;                  // Folder of the LMDB environment.
  uint64_t max_bytes = 64ULL << 30;  // Live pages; the map has slack past it.
  uint32_t max_readers = 256;
  // Bounded writer queue; 0 = $L2_WRITER_QUEUE_MAX if set, else 4096.
  uint64_t writer_queue = 0;
  // And bounded in bytes: the values queued or being written hold at most
  // this much (one value may pass it while nothing else waits). Past
  // either bound a write is dropped and counted, never waited for.
  uint64_t writer_queue_bytes = 256ULL << 20;
  absl::Duration reader_check_interval = absl::Seconds(30);
};

class L2Cache {
 public:
  // The owner of the daemon's own writes (spilled volumes, warm-ups) and of
  // values written before owners were recorded.
  static constexpr int64_t kNobody = -1;

  // Opens the environment and counts each owner's bytes from its values'
  // headers (one read pass).
  static absl::StatusOr<std::unique_ptr<L2Cache>> Open(const L2Options& options);
  ~L2Cache();

  enum class Result { kHit, kMiss, kStale, kCorrupt };
  // On kHit, *out holds the payload.
  Result Lookup(const std::string& key, const FileVersion& version,
                std::string* out);
  // On kHit, take() is given the payload where it lies in the map, or in
  // memory while its write is pending (valid during the call: a large
  // payload is copied once, where it is wanted).
  Result Lookup(const std::string& key, const FileVersion& version,
                const std::function<void(absl::string_view payload)>& take);

  // Queues a write charged to `owner` (a uid; kNobody, or any negative,
  // for the daemon's own); false (counted as a drop) when the queue is full
  // or the value is larger than an eighth of the map. The payload is held
  // until written, and written into the map in place (one copy).
  bool Put(const std::string& key, const FileVersion& version, Buffer payload,
           int64_t owner);
  bool Put(const std::string& key, const FileVersion& version, Bytes payload,
           int64_t owner) {
    return Put(key, version, BufferOf(std::move(payload)), owner);
  }

  // The bytes a value of `key_bytes` and `payload_bytes` takes (what its
  // owner is charged).
  static uint64_t ValueBytes(uint64_t key_bytes, uint64_t payload_bytes);
  // Bytes of the values `owner` holds, as of the last committed write.
  uint64_t OwnedBytes(int64_t owner) const;

  v1::TierStats Stats() const;

 private:
  friend class L2CacheTesting;  // Flush and PauseWriter (l2_cache_testing.h).
  // Waits until everything queued so far is committed (or dropped).
  void Flush();
  // Holds the writer (queued writes wait) until resumed.
  void PauseWriter(bool paused);

  struct Op {
    bool erase;
    std::string key;
    FileVersion version;
    Buffer payload;
    int64_t owner;
    uint64_t serial = 0;  // A write's, for pending_.
  };
  // A write queued or being committed, the latest of its key.
  struct Pending {
    FileVersion version;
    Buffer payload;
    uint64_t serial;
  };
  // A queued write of `key` at `version`, else null.
  Buffer PendingWrite(const std::string& key, const FileVersion& version) const;
  // Bytes by owner; owners holding none are absent.
  using Owned = absl::flat_hash_map<int64_t, uint64_t>;
  L2Cache(std::unique_ptr<LmdbEnv> env, const L2Options& options,
          uint64_t queue_max, Owned owned);
  std::string DbKey(const std::string& key) const;
  void WriterLoop();
  // `retried`: the batch found the map full once and eviction made room.
  void WriteBatch(std::deque<Op>& batch, bool retried = false);

  // Constant after construction.
  const std::unique_ptr<LmdbEnv> env_;
  const L2Options options_;
  const uint64_t queue_max_;

  std::atomic<uint64_t> hits_{0}, misses_{0}, stale_{0}, corrupt_{0};
  std::atomic<uint64_t> inserts_{0}, drops_{0}, write_errors_{0}, evictions_{0};
  std::atomic<bool> map_full_{false};  // Full with nothing left to evict.

  // Deletes entries from sweep_from_ on, sparing once the recently hit,
  // until `bytes` of values are gone: first those of owners over their
  // share (counting `incoming`, the bytes a batch about to be written
  // brings each owner), then anyone's. The bytes freed. Writer thread only.
  uint64_t Evict(uint64_t bytes, const Owned& incoming);
  // Bytes of the map's live pages.
  uint64_t LiveBytes() const;
  std::string sweep_from_;  // Writer thread only.
  // Bytes by owner; set by the writer thread only, once its transaction
  // has committed.
  mutable absl::Mutex owned_mu_;
  Owned owned_ ABSL_GUARDED_BY(owned_mu_);
  Owned OwnedNow() const;  // A copy of owned_.
  void SetOwned(Owned owned);
  // Hashes of the DB keys hit since the sweep last passed them.
  mutable absl::Mutex recent_mu_;
  absl::flat_hash_set<uint64_t> recent_ ABSL_GUARDED_BY(recent_mu_);

  mutable absl::Mutex mu_;
  std::deque<Op> queue_ ABSL_GUARDED_BY(mu_);
  // Values' bytes in queue_ and in the batch being written.
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, Pending> pending_ ABSL_GUARDED_BY(mu_);
  std::atomic<size_t> pending_count_{0};  // pending_.size(): none, no lock taken.
  uint64_t serial_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;  // A batch is being committed.
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_drop_log_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::thread writer_;
};

}  // namespace stoker

#endif  // STOKER_SERVER_CACHE_L2_CACHE_H_
