#include "server/pool/engine_split.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace stoker {

namespace {

// Steps within reach: a climb ends (min_step > 0) and starts inside 0..1.
EngineSplitOptions Bounded(EngineSplitOptions o) {
  o.first_step = std::clamp(std::isfinite(o.first_step) ? o.first_step : 0.25, 1.0 / 1024, 0.5);
  o.min_step = std::clamp(std::isfinite(o.min_step) ? o.min_step : 1.0 / 32, 1.0 / 1024,
                          o.first_step);
  o.tolerance = std::clamp(std::isfinite(o.tolerance) ? o.tolerance : 0.03, 0.0, 1.0);
  o.window = std::max<uint32_t>(1, o.window);
  return o;
}

}  // namespace

EngineSplit::EngineSplit(EngineSplitOptions options) : options_(Bounded(std::move(options))) {
  step_ = options_.first_step;
}

void EngineSplit::Hint(double cpu_rate, double gpu_rate) {
  if (!(cpu_rate > 0) || !(gpu_rate > 0)) return;  // NaN too.
  start_ = std::clamp(gpu_rate / (cpu_rate + gpu_rate), options_.min_step, 1.0);
  hinted_ = start_;
}

void EngineSplit::Disable(std::string why) {
  phase_ = Phase::kDisabled;
  why_ = std::move(why);
  share_ = 0;
  probes_.clear();
}

void EngineSplit::Observe(uint64_t batches, double seconds) {
  if (phase_ == Phase::kDisabled || batches == 0 || !(seconds > 0) || !std::isfinite(seconds)) {
    return;
  }
  const double rate = static_cast<double>(batches) / seconds;
  if (std::isfinite(rate)) Measured(rate);
}

bool EngineSplit::Beats(double rate, double than) const {
  return rate > than * (1 + options_.tolerance);
}

void EngineSplit::Measured(double rate) {
  switch (phase_) {
    case Phase::kBaseline:  // The CPU alone.
      cpu_alone_ = rate;
      best_share_ = 0;
      best_rate_ = rate;
      phase_ = Phase::kStart;
      share_ = start_;
      return;
    case Phase::kStart:
      if (Beats(rate, best_rate_)) {
        best_share_ = share_;
        best_rate_ = rate;
      }
      phase_ = Phase::kClimb;
      probe_best_rate_ = -1;
      NextProbes();
      return;
    case Phase::kClimb:
      if (rate > probe_best_rate_) {
        probe_best_rate_ = rate;
        probe_best_share_ = share_;
      }
      if (!probes_.empty()) {
        share_ = probes_.back();
        probes_.pop_back();
        return;
      }
      if (Beats(probe_best_rate_, best_rate_)) {
        best_share_ = probe_best_share_;
        best_rate_ = probe_best_rate_;
      } else {
        step_ /= 2;
      }
      probe_best_rate_ = -1;
      NextProbes();
      return;
    case Phase::kSettled: {
      // Two rounds in a row well below the rate it settled at (an engine
      // or a trainer got slower), or a kept share below the CPU alone.
      const double floor = std::max(settled_rate_ * (1 - 2 * options_.tolerance),
                                    best_share_ > 0 ? cpu_alone_ : 0.0);
      const bool dropped = last_rate_ >= 0 && rate < floor && last_rate_ < floor;
      last_rate_ = rate;
      best_rate_ = rate;
      if (!dropped && ++settled_rounds_ < options_.recheck_rounds) return;
      // Measure the CPU alone and the kept share again; climb from there,
      // in smaller steps (a share kept at 0 tries the start share again).
      start_ = best_share_ > 0 ? best_share_ : hinted_;
      step_ = options_.first_step / 2;
      phase_ = Phase::kBaseline;
      share_ = 0;
      return;
    }
    case Phase::kDisabled:
      return;
  }
}

void EngineSplit::NextProbes() {
  probes_.clear();
  for (; step_ >= options_.min_step; step_ /= 2) {
    // Measured in this order: the share below, then the one above.
    for (double s : {best_share_ + step_, best_share_ - step_}) {
      s = std::clamp(s, 0.0, 1.0);
      if (s != best_share_ && std::find(probes_.begin(), probes_.end(), s) == probes_.end()) {
        probes_.push_back(s);
      }
    }
    if (!probes_.empty()) break;
  }
  if (probes_.empty()) {
    Settle();
    return;
  }
  share_ = probes_.back();
  probes_.pop_back();
}

void EngineSplit::Settle() {
  phase_ = Phase::kSettled;
  settled_rounds_ = 0;
  if (!Beats(best_rate_, cpu_alone_)) {  // Never slower than the CPU alone.
    best_share_ = 0;
    best_rate_ = cpu_alone_;
  }
  share_ = best_share_;
  settled_rate_ = best_rate_;
  last_rate_ = -1;  // None yet.
}

}  // namespace stoker
