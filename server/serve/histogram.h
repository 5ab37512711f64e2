// A lock-free latency histogram with fixed buckets (100 us .. 10 s), for
// per-sample stage times on the hot path: Observe is a few relaxed atomic
// adds. Thread-safe.
#ifndef STOKER_SERVER_SERVE_HISTOGRAM_H_
#define STOKER_SERVER_SERVE_HISTOGRAM_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "proto/stoker.pb.h"

namespace stoker {

class LatencyHistogram {
 public:
  static constexpr std::array<double, 15> kBounds = {
      1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2,
      5e-2, 0.1,    0.25,   0.5,  1.0,    2.5,  10.0};

  // `n` observations of ns / n each (a run of samples timed as one).
  void Observe(uint64_t ns, uint64_t n = 1) {
    if (n == 0) return;
    const double s = ns * 1e-9 / n;
    size_t i = 0;
    while (i < kBounds.size() && s > kBounds[i]) ++i;
    counts_[i].fetch_add(n, std::memory_order_relaxed);
    sum_ns_.fetch_add(ns, std::memory_order_relaxed);
  }

  v1::Histogram Snapshot() const {
    v1::Histogram h;
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= kBounds.size(); ++i) {
      cumulative += counts_[i].load(std::memory_order_relaxed);
      if (i < kBounds.size()) h.add_upper_bounds(kBounds[i]);
      h.add_cumulative_counts(cumulative);
    }
    h.set_count(cumulative);
    h.set_sum(sum_ns_.load(std::memory_order_relaxed) * 1e-9);
    return h;
  }

 private:
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> counts_{};
  std::atomic<uint64_t> sum_ns_{0};
};

}  // namespace stoker

#endif  // STOKER_SERVER_SERVE_HISTOGRAM_H_
