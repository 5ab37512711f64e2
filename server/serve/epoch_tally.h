// A session's reads from a remote source (an object store), per epoch:
// requests and bytes, for the last kEpochs epochs begun, and in total. An
// epoch is begun when its first batch is scheduled, so an epoch served
// wholly from the caches shows as zero requests. A read for an epoch not
// begun (or no longer kept) counts in the total only. Thread-safe.
#ifndef STOKER_SERVER_SERVE_EPOCH_TALLY_H_
#define STOKER_SERVER_SERVE_EPOCH_TALLY_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace stoker {

class EpochTally {
 public:
  static constexpr size_t kEpochs = 16;

  struct Counts {
    uint64_t epoch = 0;  // Unused in total().
    uint64_t requests = 0;
    uint64_t bytes = 0;
  };

  // Begins `epoch` (at zero); epochs are begun in increasing order, and one
  // begun again is left as it is.
  void Begin(uint64_t epoch);
  // `requests` of `epoch` that read `bytes`.
  void Add(uint64_t epoch, uint64_t bytes, uint64_t requests = 1);

  Counts total() const;
  // The epochs kept, oldest first.
  std::vector<Counts> epochs() const;

 private:
  mutable absl::Mutex mu_;
  std::deque<Counts> epochs_ ABSL_GUARDED_BY(mu_);
  Counts total_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_SERVER_SERVE_EPOCH_TALLY_H_
