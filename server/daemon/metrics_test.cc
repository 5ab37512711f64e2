#include "server/daemon/metrics.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace stoker {
namespace {

// The values of family `name`'s series, with their session labels.
std::vector<std::pair<std::string, double>> Series(
    const std::vector<prometheus::MetricFamily>& families, const std::string& name) {
  std::vector<std::pair<std::string, double>> out;
  for (const prometheus::MetricFamily& f : families) {
    if (f.name != name) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      std::string session;
      for (const prometheus::ClientMetric::Label& l : m.label) {
        if (l.name == "session") session = l.value;
      }
      out.emplace_back(session, m.gauge.value);
    }
  }
  return out;
}

TEST(MetricsTest, ASessionsOrderShowsItsMixingAndAnExchangeWeighedByBytesItsOverruns) {
  v1::DaemonStats s;
  v1::SessionStats* by_bytes = s.add_sessions();
  by_bytes->set_session_id(4);
  by_bytes->mutable_order()->set_partitions_per_step(22.75);
  by_bytes->mutable_order()->set_spread(0.33);
  by_bytes->mutable_order()->set_exchanged(4);
  by_bytes->mutable_order()->set_exchange_by_bytes(true);
  by_bytes->mutable_order()->set_exchange_over_budget(2);
  v1::SessionStats* by_count = s.add_sessions();
  by_count->set_session_id(5);
  by_count->mutable_order()->set_partitions_per_step(24);
  by_count->mutable_order()->set_exchanged(4);
  s.add_sessions()->set_session_id(6);  // Unshuffled: no order.
  const std::vector<prometheus::MetricFamily> families = MetricFamilies(s);
  using Values = std::vector<std::pair<std::string, double>>;
  EXPECT_EQ(Series(families, "stoker_session_order_partitions_per_step"),
            (Values{{"4", 22.75}, {"5", 24}}));
  // Only where the exchange is weighed by bytes.
  EXPECT_EQ(Series(families, "stoker_session_order_exchange_over_budget"), (Values{{"4", 2}}));
}

}  // namespace
}  // namespace stoker
