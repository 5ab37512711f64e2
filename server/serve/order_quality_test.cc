#include "server/serve/order_quality.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

// The same figures, by a plain count over the same positions.
OrderQuality Counted(const CanonicalOrder& o, uint64_t epoch, uint64_t step, uint64_t steps) {
  OrderQuality q;
  double gaps = 0;
  for (uint64_t s = 0; s < steps; ++s) {
    std::set<uint32_t> homes;
    for (uint64_t i = s * step; i < (s + 1) * step; ++i) homes.insert(o.HomeAt(epoch, i));
    q.partitions_per_step += static_cast<double>(homes.size()) / static_cast<double>(steps);
  }
  for (uint64_t i = 1; i < steps * step; ++i) {
    gaps += std::abs(static_cast<double>(o.At(epoch, i)) - static_cast<double>(o.At(epoch, i - 1)));
  }
  q.spread = gaps / static_cast<double>(steps * step - 1) / static_cast<double>(o.size());
  return q;
}

TEST(OrderQualityTest, AStepCoversItsPositionsPartitionsAndTheOrderSpreadsAsAUniformOne) {
  const CanonicalOrder none(2400, 3, 24, 0);  // 24 partitions of 100.
  for (uint64_t step : {12u, 24u, 48u}) {
    const OrderQuality q = MeasureOrder(none, 1, step);
    EXPECT_EQ(q.epoch, 1u);
    EXPECT_EQ(q.steps, std::min<uint64_t>(64, 2400 / step));
    // Round-robin: a step's positions lie in min(step, C) partitions.
    EXPECT_EQ(q.partitions_per_step, std::min<uint64_t>(step, 24)) << step;
    EXPECT_GT(q.spread, 0.30) << step;
    EXPECT_LT(q.spread, 0.37) << step;
  }
  // An exchange brings some steps two samples of one partition: fewer,
  // never more, and as a plain count finds them.
  for (float exchange : {0.05f, 0.5f, 1.0f}) {
    const CanonicalOrder o(2400, 3, 24, exchange);
    for (uint64_t epoch : {0u, 1u, 4u}) {
      const OrderQuality q = MeasureOrder(o, epoch, 24);
      const OrderQuality c = Counted(o, epoch, 24, q.steps);
      EXPECT_DOUBLE_EQ(q.partitions_per_step, c.partitions_per_step) << exchange;
      EXPECT_NEAR(q.spread, c.spread, 1e-12) << exchange;
      EXPECT_LE(q.partitions_per_step, 24.0);
      EXPECT_GE(q.partitions_per_step, 12.0);
      if (epoch == 0 || exchange == 1.0f) {
        EXPECT_EQ(q.partitions_per_step, 24.0) << exchange << " " << epoch;  // One each.
      }
    }
  }
  EXPECT_LT(MeasureOrder(CanonicalOrder(2400, 3, 24, 0.5f), 1, 24).partitions_per_step, 24.0);
  // The exchange it reports: none in epoch 0; by bytes when sizes are given.
  const auto sizes = [](uint64_t i) { return 1000 + i % 7 * 300; };
  const CanonicalOrder by_bytes(2400, 3, 24, 0.05f, sizes);
  EXPECT_EQ(MeasureOrder(by_bytes, 0, 24).exchanged, 0u);
  EXPECT_FALSE(MeasureOrder(by_bytes, 0, 24).by_bytes);
  const OrderQuality later = MeasureOrder(by_bytes, 1, 24);
  EXPECT_EQ(later.exchanged, 5u);
  EXPECT_TRUE(later.by_bytes);
  EXPECT_FALSE(MeasureOrder(CanonicalOrder(2400, 3, 24, 0.05f), 1, 24).by_bytes);
}

TEST(OrderQualityTest, MeasuresAtMostItsStepsAndPositionsAndAnOrderShorterThanAStep) {
  const CanonicalOrder big(uint64_t{1} << 40, 5, 120, 0);
  const OrderQuality q = MeasureOrder(big, 2, 4096);
  EXPECT_EQ(q.steps, kMeasuredPositions / 4096);
  EXPECT_EQ(q.partitions_per_step, 120.0);
  EXPECT_EQ(MeasureOrder(big, 2, 1u << 20).steps, 1u);  // Its first 65,536.
  const OrderQuality small = MeasureOrder(CanonicalOrder(20, 5, 120, 0), 1, 64);
  EXPECT_EQ(small.steps, 1u);
  EXPECT_EQ(small.partitions_per_step, 1.0);  // 20 samples: one partition.
  EXPECT_GT(small.spread, 0.0);
}

std::shared_ptr<Dataset> Samples(uint64_t n, std::vector<uint64_t> windows) {
  auto ds = std::make_shared<Dataset>();
  for (uint64_t i = 0; i < n; ++i) ds->samples.push_back({absl::StrCat(i), 0, {}});
  ds->first_epoch_windows = std::move(windows);
  return ds;
}

// Reads `order` until its producer would begin `epoch`, measuring each
// epoch begun as a session's producer does; the report then.
std::optional<OrderQuality> ReadInto(BatchOrder& order, OrderQualityReport& report,
                                     uint64_t epoch) {
  BatchOrder::Batch b;
  do {
    EXPECT_TRUE(order.Next([] { return false; }, &b).ok());
    if (b.index == 0) report.Measure(order, b.epoch);
  } while (b.epoch < epoch);
  return report.Last();
}

TEST(OrderQualityTest, ASessionReportsTheCanonicalEpochItBegan) {
  PlanSpec spec;
  spec.batch_size = 5;
  spec.shuffle = true;
  spec.seed = 2;
  spec.world_size = 2;
  spec.partitions = 6;
  spec.exchange = 0;
  // Windows: the first epoch is not the canonical order; the second is.
  auto windowed = BatchOrder::Create(spec, Samples(120, {60, 60}), {}).value();
  OrderQualityReport report;
  EXPECT_FALSE(report.Last().has_value());  // Nothing begun.
  EXPECT_FALSE(ReadInto(*windowed, report, 0).has_value());
  std::optional<OrderQuality> q = ReadInto(*windowed, report, 1);
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->epoch, 1u);
  EXPECT_EQ(q->partitions, 6u);
  EXPECT_EQ(q->step, 10u);
  EXPECT_EQ(q->partitions_per_step, 6.0);  // Steps of 10 over 6 partitions.
  EXPECT_EQ(q->steps, 12u);
  q = ReadInto(*windowed, report, 2);  // Each epoch measured as it begins.
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->epoch, 2u);
  // One window is the canonical order from the first epoch on.
  OrderQualityReport whole_report;
  auto whole = BatchOrder::Create(spec, Samples(120, {}), {}).value();
  q = ReadInto(*whole, whole_report, 0);
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->epoch, 0u);
  EXPECT_EQ(q->partitions_per_step, 6.0);
  // Unshuffled: none.
  spec.shuffle = false;
  OrderQualityReport plain_report;
  auto plain = BatchOrder::Create(spec, Samples(120, {}), {}).value();
  EXPECT_FALSE(ReadInto(*plain, plain_report, 1).has_value());
}

}  // namespace
}  // namespace stoker
