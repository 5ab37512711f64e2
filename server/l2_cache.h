// L2: encoded samples in an LMDB environment on local disk (NVMe), shared
// by every session and surviving daemon restarts.
//
// Reads (Lookup) run on the caller's thread with a read-only transaction;
// writes are queued to one writer thread that commits them in batches, so
// a read never waits for a write. The queue is bounded: when it is full,
// new writes are dropped and counted ("L2 writer queue full" is logged at
// most every 10 s). The map never fills for good: once its live pages pass
// 85 % of it, or a batch finds it full, entries are evicted until 70 % is
// in use, in key order from where the last sweep stopped, sparing once
// those hit since the sweep last passed them (CLOCK: least recently used
// first, without a write per hit). Only a value larger than what eviction
// can free is dropped (counted).
//
// Each value carries the source file's size and mtime, its full key and a
// checksum: an entry for another version of the file is "stale" (a miss),
// one that fails its checksum is "corrupt" (counted, logged as "L2 cache
// decode failed", deleted, a miss). mdb_reader_check runs at open and
// periodically. Thread-safe; the destructor writes what is queued first.
#ifndef STOKER_SERVER_L2_CACHE_H_
#define STOKER_SERVER_L2_CACHE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/stoker.pb.h"
#include "server/buffer.h"
#include "server/cache.h"
#include "server/file_system.h"
#include "server/lmdb_env.h"

namespace stoker {

struct L2Options {
  std::string path;                  // Folder of the LMDB environment.
  uint64_t max_bytes = 64ULL << 30;  // LMDB map size.
  uint32_t max_readers = 256;
  // Bounded writer queue; 0 = $L2_WRITER_QUEUE_MAX if set, else 4096.
  uint64_t writer_queue = 0;
  absl::Duration reader_check_interval = absl::Seconds(30);
};

class L2Cache {
 public:
  static absl::StatusOr<std::unique_ptr<L2Cache>> Open(const L2Options& options);
  ~L2Cache();

  enum class Result { kHit, kMiss, kStale, kCorrupt };
  // On kHit, *out holds the payload.
  Result Lookup(const std::string& key, const FileVersion& version,
                std::string* out);
  // On kHit, take() is given the payload where it lies in the map (valid
  // during the call: a large payload is copied once, where it is wanted).
  Result Lookup(const std::string& key, const FileVersion& version,
                const std::function<void(absl::string_view payload)>& take);

  // Queues a write; false (counted as a drop) when the queue is full or
  // the value is larger than an eighth of the map. The payload is held until written, and written into
  // the map in place (one copy).
  bool Put(const std::string& key, const FileVersion& version, Buffer payload);
  bool Put(const std::string& key, const FileVersion& version, Bytes payload) {
    return Put(key, version, BufferOf(std::move(payload)));
  }

  // Waits until everything queued so far is committed (or dropped).
  void Flush();
  // Holds the writer (queued writes wait) until resumed; for tests.
  void PauseWriter(bool paused);

  v1::TierStats Stats() const;

 private:
  struct Op {
    bool erase;
    std::string key;
    FileVersion version;
    Buffer payload;
  };
  L2Cache(std::unique_ptr<LmdbEnv> env, const L2Options& options,
          uint64_t queue_max);
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

  // Deletes entries from sweep_from_ on (wrapping once), sparing once the
  // recently hit, until `bytes` of values are gone; the bytes freed.
  // Writer thread only.
  uint64_t Evict(uint64_t bytes);
  // Bytes of the map's live pages.
  uint64_t LiveBytes() const;
  std::string sweep_from_;  // Writer thread only.
  // Hashes of the DB keys hit since the sweep last passed them.
  mutable absl::Mutex recent_mu_;
  absl::flat_hash_set<uint64_t> recent_ ABSL_GUARDED_BY(recent_mu_);

  mutable absl::Mutex mu_;
  std::deque<Op> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;  // A batch is being committed.
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_drop_log_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::thread writer_;
};

}  // namespace stoker

#endif  // STOKER_SERVER_L2_CACHE_H_
