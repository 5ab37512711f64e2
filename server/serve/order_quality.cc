#include "server/serve/order_quality.h"

#include <algorithm>
#include <vector>

namespace stoker {

OrderQuality MeasureOrder(const CanonicalOrder& order, uint64_t epoch, uint64_t step) {
  OrderQuality q;
  q.epoch = epoch;
  q.partitions = order.partitions();
  q.step = step;
  const uint64_t n = order.size();
  if (n == 0) return q;
  step = std::clamp<uint64_t>(step, 1, std::min(n, kMeasuredPositions));
  q.steps = std::max<uint64_t>(1, std::min({kMeasuredSteps, kMeasuredPositions / step, n / step}));
  // Each partition marked with the step that last saw it.
  std::vector<uint64_t> seen(order.partitions(), UINT64_MAX);
  uint64_t covered = 0, gaps = 0, previous = 0;
  for (uint64_t s = 0; s < q.steps; ++s) {
    for (uint64_t i = s * step; i < (s + 1) * step; ++i) {
      uint64_t& mark = seen[order.HomeAt(epoch, i)];
      if (mark != s) ++covered;
      mark = s;
      const uint64_t sample = order.At(epoch, i);
      if (i > 0) gaps += sample > previous ? sample - previous : previous - sample;
      previous = sample;
    }
  }
  const uint64_t positions = q.steps * step;
  q.partitions_per_step = static_cast<double>(covered) / static_cast<double>(q.steps);
  if (positions > 1) {
    q.spread = static_cast<double>(gaps) / static_cast<double>(positions - 1) /
               static_cast<double>(n);
  }
  return q;
}

std::optional<OrderQuality> OrderQualityReport::For(const BatchOrder& order) {
  const uint64_t epoch = order.epoch_read();
  const EpochPlan* plan = order.plan();
  if (plan == nullptr || plan->canonical() == nullptr || !order.Canonical(epoch)) {
    return std::nullopt;
  }
  absl::MutexLock lock(&mu_);
  if (!last_.has_value() || last_->epoch != epoch) {
    const PlanSpec& spec = plan->spec();
    last_ = MeasureOrder(*plan->canonical(), epoch,
                         uint64_t{spec.batch_size} * std::max<uint32_t>(spec.world_size, 1));
  }
  return last_;
}

}  // namespace stoker
