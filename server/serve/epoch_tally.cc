#include "server/serve/epoch_tally.h"

namespace stoker {

void EpochTally::Begin(uint64_t epoch) {
  absl::MutexLock lock(&mu_);
  if (!epochs_.empty() && epochs_.back().epoch >= epoch) return;
  epochs_.push_back(Counts{epoch, 0, 0});
  if (epochs_.size() > kEpochs) epochs_.pop_front();
}

void EpochTally::Add(uint64_t epoch, uint64_t bytes, uint64_t requests) {
  absl::MutexLock lock(&mu_);
  total_.requests += requests;
  total_.bytes += bytes;
  for (auto it = epochs_.rbegin(); it != epochs_.rend(); ++it) {
    if (it->epoch == epoch) {
      it->requests += requests;
      it->bytes += bytes;
      return;
    }
    if (it->epoch < epoch) return;
  }
}

EpochTally::Counts EpochTally::total() const {
  absl::MutexLock lock(&mu_);
  return total_;
}

std::vector<EpochTally::Counts> EpochTally::epochs() const {
  absl::MutexLock lock(&mu_);
  return std::vector<Counts>(epochs_.begin(), epochs_.end());
}

}  // namespace stoker
