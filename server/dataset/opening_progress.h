// How far a dataset's opening has come, for the trainer waiting on it
// (GetStats' openings, which its client shows) and for the daemon's log:
// what was listed (files, keys, class prefixes) and, for shards read whole
// to index them, shards and bytes done of how many, with the time left at
// the rate so far. A source kind's threads count into it (ScanLimits::
// progress) while stats read it. Thread-safe: relaxed atomics.
#ifndef STOKER_SERVER_DATASET_OPENING_PROGRESS_H_
#define STOKER_SERVER_DATASET_OPENING_PROGRESS_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace stoker {

class OpeningProgress {
 public:
  explicit OpeningProgress(absl::Time start = absl::Now()) : start_(start) {}

  void Listed(uint64_t n) { listed_.fetch_add(n, std::memory_order_relaxed); }
  // The shards to index and their bytes in all (0: not known).
  void Shards(uint64_t shards, uint64_t bytes) {
    shards_.store(shards, std::memory_order_relaxed);
    bytes_.store(bytes, std::memory_order_relaxed);
  }
  void ShardDone() { shards_done_.fetch_add(1, std::memory_order_relaxed); }
  // Bytes of the total that need no reading (a shard's kept index).
  void Skipped(uint64_t bytes) { bytes_.fetch_sub(bytes, std::memory_order_relaxed); }
  void Read(uint64_t bytes) { bytes_read_.fetch_add(bytes, std::memory_order_relaxed); }

  struct View {
    uint64_t listed = 0;
    uint64_t shards = 0, shards_done = 0;
    uint64_t bytes = 0, bytes_read = 0;
    absl::Duration elapsed;
    absl::Duration left = absl::InfiniteDuration();  // At the rate so far; infinite: not known.
  };
  View Now(absl::Time now = absl::Now()) const;
  // "<name>: 1,204 listed, 12 of 147 shards, 1.2 of 54.0 GiB read, about
  // 3 min left" (the parts known), as people read it.
  std::string Summary(const std::string& name, absl::Time now = absl::Now()) const;

 private:
  const absl::Time start_;
  std::atomic<uint64_t> listed_{0}, shards_{0}, shards_done_{0}, bytes_{0}, bytes_read_{0};
};

}  // namespace stoker

#endif  // STOKER_SERVER_DATASET_OPENING_PROGRESS_H_
