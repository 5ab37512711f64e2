#include "server/objstore/in_flight_limit.h"

#include <algorithm>

namespace stoker {

InFlightLimit::InFlightLimit(int min, int initial, int max)
    : min_(min), max_(max), limit_(std::clamp(initial, min, max)) {}

double InFlightLimit::queued() const {
  if (rtt_ <= absl::ZeroDuration() || base_ == absl::InfiniteDuration()) return 0;
  return limit_ * std::max(0.0, 1.0 - absl::FDivDuration(base_, rtt_));
}

void InFlightLimit::EndProbe(absl::Time now) {
  limit_ = saved_limit_;
  probe_until_ = absl::InfinitePast();
  next_probe_ = now + kProbeEvery;
}

void InFlightLimit::Tick(absl::Time now) {
  if (probing() && now >= probe_until_) EndProbe(now);
}

void InFlightLimit::Answered(absl::Duration first_byte, int sent_with, bool waiting,
                             absl::Time now) {
  first_byte = std::max(first_byte, absl::Microseconds(1));
  base_ = std::min(base_, first_byte);
  rtt_ = rtt_ == absl::ZeroDuration() ? first_byte : rtt_ * 0.875 + first_byte * 0.125;
  if (next_probe_ == absl::InfiniteFuture()) next_probe_ = now + kProbeEvery;
  if (sent_with <= min_) {  // The path's own latency, nearly unqueued.
    low_load_base_ = std::min(low_load_base_, first_byte);
    if (++low_load_samples_ >= kBaseSamples) {
      base_ = low_load_base_;
      low_load_base_ = absl::InfiniteDuration();
      low_load_samples_ = 0;
      if (probing()) EndProbe(now);
      return;
    }
  }
  Tick(now);
  if (probing()) return;
  if (now >= next_probe_ && limit_ > min_) {
    saved_limit_ = limit_;
    limit_ = min_;
    probe_until_ = now + std::clamp(4 * rtt_, kProbeShortest, kProbeLongest);
    low_load_base_ = absl::InfiniteDuration();
    low_load_samples_ = 0;
    return;
  }
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
  slow_start_ = false;
  window_ = 0;
  if (probing()) {  // Halve what the probe restores.
    saved_limit_ = std::max(min_, saved_limit_ / 2);
    return;
  }
  limit_ = std::max(min_, limit_ / 2);
}

}  // namespace stoker
