#include "server/objstore/in_flight_limit.h"

#include <algorithm>

namespace stoker {

InFlightLimit::InFlightLimit(int min, int initial, int max)
    : min_(min), max_(max), limit_(std::clamp(initial, min, max)) {}

double InFlightLimit::queued() const {
  if (rtt_ <= absl::ZeroDuration() || base_ == absl::InfiniteDuration()) return 0;
  return limit_ * std::max(0.0, 1.0 - absl::FDivDuration(base_, rtt_));
}

bool InFlightLimit::Probing(absl::Duration first_byte, int in_flight) {
  switch (probe_) {
    case Probe::kNone:
      if (++answers_ < kProbeEvery) return false;
      answers_ = 0;
      probe_ = Probe::kDraining;
      saved_limit_ = limit_;
      limit_ = min_;
      return true;
    case Probe::kDraining:
      if (in_flight <= min_) {
        probe_ = Probe::kMeasuring;
        probe_left_ = min_;
        probe_base_ = absl::InfiniteDuration();
      }
      return true;
    case Probe::kMeasuring:
      probe_base_ = std::min(probe_base_, first_byte);
      if (--probe_left_ > 0) return true;
      base_ = probe_base_;
      rtt_ = std::max(rtt_, base_);
      limit_ = saved_limit_;
      probe_ = Probe::kNone;
      return true;
  }
  return false;
}

void InFlightLimit::Answered(absl::Duration first_byte, int in_flight, bool waiting) {
  first_byte = std::max(first_byte, absl::Microseconds(1));
  if (Probing(first_byte, in_flight)) return;
  base_ = std::min(base_, first_byte);
  rtt_ = rtt_ == absl::ZeroDuration() ? first_byte : rtt_ * 0.875 + first_byte * 0.125;
  if (!waiting) return;
  const double q = queued();
  if (slow_start_) {
    if (q > kMostQueued) {
      slow_start_ = false;
    } else {
      limit_ = std::min(max_, limit_ + 1);
    }
    return;
  }
  if (++window_ < limit_) return;
  window_ = 0;
  if (q < kFewestQueued) {
    limit_ = std::min(max_, limit_ + 1);
  } else if (q > kMostQueued) {
    limit_ = std::max(min_, limit_ - 1);
  }
}

void InFlightLimit::Throttled() {
  if (probe_ != Probe::kNone) {  // Halve what the probe will restore.
    saved_limit_ = std::max(min_, saved_limit_ / 2);
    slow_start_ = false;
    return;
  }
  limit_ = std::max(min_, limit_ / 2);
  slow_start_ = false;
  window_ = 0;
}

}  // namespace stoker
