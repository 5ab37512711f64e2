#include "server/serve/order_quality.h"

#include <algorithm>
#include <vector>

#include "server/serve/plan.h"

namespace stoker {

OrderQuality MeasureOrder(const CanonicalOrder& order, uint64_t epoch, uint64_t step) {
  OrderQuality q;
  q.epoch = epoch;
  q.partitions = order.partitions();
  q.step = step;
  q.exchanged = epoch == 0 ? 0 : order.exchanged();
  q.by_bytes = q.exchanged > 0 && order.ExchangeByBytes();
  q.over_budget = q.by_bytes ? order.ExchangeOverBudget(epoch) : 0;
  const uint64_t n = order.size();
  if (n == 0) return q;
  step = std::clamp<uint64_t>(step, 1, std::min(n, kMeasuredPositions));
  q.steps = std::max<uint64_t>(1, std::min({kMeasuredSteps, kMeasuredPositions / step, n / step}));
  // Each partition marked with the step that last saw it.
  std::vector<uint64_t> seen(order.partitions(), UINT64_MAX);
  uint64_t covered = 0, previous = 0;
  double gaps = 0;
  for (uint64_t s = 0; s < q.steps; ++s) {
    for (uint64_t i = s * step; i < (s + 1) * step; ++i) {
      uint32_t home = 0;
      const uint64_t sample = order.At(epoch, i, &home);
      if (seen[home] != s) ++covered;
      seen[home] = s;
      const uint64_t gap = sample > previous ? sample - previous : previous - sample;
      if (i > 0) gaps += static_cast<double>(gap);
      previous = sample;
    }
  }
  const uint64_t positions = q.steps * step;
  q.partitions_per_step = static_cast<double>(covered) / static_cast<double>(q.steps);
  if (positions > 1) {
    q.spread = gaps / static_cast<double>(positions - 1) / static_cast<double>(n);
  }
  return q;
}

void OrderQualityReport::Measure(const BatchOrder& order, uint64_t epoch) {
  const EpochPlan* plan = order.plan();
  std::optional<OrderQuality> q;
  if (plan != nullptr && plan->canonical() != nullptr && order.Canonical(epoch)) {
    const PlanSpec& spec = plan->spec();
    q = MeasureOrder(*plan->canonical(), epoch,
                     uint64_t{spec.batch_size} * std::max<uint32_t>(spec.world_size, 1));
  }
  absl::MutexLock lock(&mu_);  // Measured without it: a stats call never waits.
  last_ = q;
}

std::optional<OrderQuality> OrderQualityReport::Last() const {
  absl::MutexLock lock(&mu_);
  return last_;
}

}  // namespace stoker
