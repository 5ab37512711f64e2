#include "server/pool/load_monitor.h"

#include <vector>

#include "gtest/gtest.h"

namespace stoker {
namespace {

constexpr uint64_t kSecond = 1'000'000'000;

// Drives a monitor with steady per-second rates for `ticks` ticks.
struct Driver {
  LoadMonitor monitor{LoadMonitor::Options{}};
  uint64_t now = 0;
  std::vector<LoadMonitor::PoolReport> decode{{2, 0}};  // Per node.
  LoadMonitor::PoolReport reader{64, 0};
  std::vector<LoadMonitor::SessionReport> sessions;

  // Per second: busy fractions of the pools; per session: samples, wait
  // fraction, read and work seconds, ring fill.
  struct Rates {
    uint64_t samples = 100;
    double wait = 0, read = 0.01, work = 0.1, fill = 0.5;
    int node = 0;
  };
  void Run(int ticks, double decode_busy, double reader_busy,
           const std::vector<Rates>& rates) {
    RunNodes(ticks, std::vector<double>(decode.size(), decode_busy), reader_busy, rates);
  }
  // Each node's decode pool at its own busy fraction.
  void RunNodes(int ticks, const std::vector<double>& decode_busy, double reader_busy,
                const std::vector<Rates>& rates) {
    sessions.resize(rates.size());
    for (int t = 0; t < ticks; ++t) {
      now += kSecond;
      for (size_t n = 0; n < decode.size(); ++n) {
        decode[n].busy_ns +=
            static_cast<uint64_t>(decode_busy[n] * decode[n].threads * kSecond);
      }
      reader.busy_ns += static_cast<uint64_t>(reader_busy * reader.threads * kSecond);
      for (size_t i = 0; i < rates.size(); ++i) {
        auto& s = sessions[i];
        s.id = i + 1;
        s.samples += rates[i].samples;
        s.client_wait_ns += static_cast<uint64_t>(rates[i].wait * kSecond);
        s.read_ns += static_cast<uint64_t>(rates[i].read * kSecond);
        s.work_ns += static_cast<uint64_t>(rates[i].work * kSecond);
        s.ring_fill = rates[i].fill;
        s.node = rates[i].node;
      }
      monitor.Tick(now, decode, reader, sessions);
    }
  }
  v1::Diagnosis Of(uint64_t id) const { return monitor.Session(id).diagnosis; }
};

TEST(LoadMonitorTest, WarmsUpThenDiagnosesEachCase) {
  Driver d;
  d.Run(2, 0.2, 0.1, {{}});
  EXPECT_EQ(d.Of(1), v1::DIAGNOSIS_WARMING_UP);
  d.Run(10, 0.2, 0.1, {{100, 0.01}});
  EXPECT_EQ(d.Of(1), v1::DIAGNOSIS_BALANCED);
  d.Run(15, 0.2, 0.1, {{100, 0.0, 0.01, 0.1, 1.0}});
  EXPECT_EQ(d.Of(1), v1::DIAGNOSIS_CONSUMER_BOUND);
  d.Run(15, 0.95, 0.1, {{100, 0.5, 0.01, 0.5, 0.0}});
  EXPECT_EQ(d.Of(1), v1::DIAGNOSIS_DECODE_BOUND);
  // Reads take most of the samples' time: read-bound.
  d.Run(15, 0.3, 0.3, {{100, 0.5, 0.9, 0.1, 0.0}});
  EXPECT_EQ(d.Of(1), v1::DIAGNOSIS_READ_BOUND);
  // Nothing busy, yet the client waits: too few batches in flight.
  d.Run(15, 0.2, 0.05, {{100, 0.5, 0.01, 0.1, 0.0}});
  EXPECT_EQ(d.Of(1), v1::DIAGNOSIS_LATENCY_BOUND);
  EXPECT_NEAR(d.monitor.Session(1).samples_per_second, 100, 1);
  EXPECT_EQ(d.monitor.Session(99).diagnosis, v1::DIAGNOSIS_WARMING_UP);
}

// The misdiagnosis this class fixes: data in the page cache (reads take
// almost no time), decode threads mostly busy, the client waiting. That is
// decode work, not storage.
TEST(LoadMonitorTest, FastReadsAreNeverReadBound) {
  Driver d;
  d.Run(20, 0.7, 0.02, {{400, 0.3, 0.002, 0.9, 0.0}});
  EXPECT_EQ(d.Of(1), v1::DIAGNOSIS_DECODE_BOUND);
  EXPECT_LT(d.monitor.Session(1).read_share, 0.01);
}

TEST(LoadMonitorTest, StarvedByFairShareNeedsASmallShareOfABusyPool) {
  Driver d;
  // Two sessions, the first gets 9 of every 10 samples.
  d.Run(20, 0.95, 0.1, {{900, 0.5, 0.01, 0.5, 0.0}, {100, 0.5, 0.01, 0.5, 0.0}});
  EXPECT_EQ(d.Of(1), v1::DIAGNOSIS_DECODE_BOUND);
  EXPECT_EQ(d.Of(2), v1::DIAGNOSIS_STARVED_BY_FAIR_SHARE);
  EXPECT_NEAR(d.monitor.Session(2).share, 0.1, 0.01);
  // A session that goes away is forgotten.
  d.Run(1, 0.95, 0.1, {{900, 0.5, 0.01, 0.5, 0.0}});
  EXPECT_EQ(d.monitor.Session(2).samples_per_second, 0);
}

TEST(LoadMonitorTest, AutotuneStepsEveryFewTicks) {
  Driver d;
  d.Run(15, 0.95, 0.1, {{100, 0.5, 0.01, 0.5, 0.0}});
  auto grow = d.monitor.Autotune({2}, {64}, 64);
  EXPECT_FALSE(grow.has_value());  // Only every 4th call decides.
  d.monitor.Autotune({2}, {64}, 64);
  d.monitor.Autotune({2}, {64}, 64);
  grow = d.monitor.Autotune({2}, {64}, 64);
  ASSERT_TRUE(grow.has_value());
  EXPECT_EQ(grow->pool, "decode");
  EXPECT_EQ(grow->threads, 3);
  // Every session consumer-bound and decode idle: one thread less.
  d.Run(15, 0.3, 0.1, {{100, 0.0, 0.01, 0.1, 1.0}});
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(d.monitor.Autotune({3}, {64}, 64).has_value());
  auto shrink = d.monitor.Autotune({3}, {64}, 64);
  ASSERT_TRUE(shrink.has_value());
  EXPECT_EQ(shrink->pool, "decode");
  EXPECT_EQ(shrink->threads, 2);
  // Read-bound: readers double.
  d.Run(15, 0.3, 0.9, {{100, 0.5, 0.9, 0.1, 0.0}});
  for (int i = 0; i < 3; ++i) d.monitor.Autotune({2}, {64}, 64);
  auto readers = d.monitor.Autotune({2}, {64}, 64);
  ASSERT_TRUE(readers.has_value());
  EXPECT_EQ(readers->pool, "reader");
  EXPECT_EQ(readers->threads, 128);
}

// Two nodes: each session is judged against its own node's pool, shares
// are among a node's sessions, and autotune resizes the node that needs it.
TEST(LoadMonitorTest, NodesAreJudgedAndTunedApart) {
  Driver d;
  d.decode = {{2, 0}, {2, 0}};
  // Node 0 saturated, its session waiting; node 1 idle, its session (a
  // tenth of all samples, but alone on its node) waiting on little work.
  Driver::Rates busy{900, 0.5, 0.01, 0.5, 0.0, 0};
  Driver::Rates alone{100, 0.5, 0.01, 0.1, 0.0, 1};
  d.RunNodes(20, {0.95, 0.2}, 0.1, {busy, alone});
  EXPECT_EQ(d.Of(1), v1::DIAGNOSIS_DECODE_BOUND);
  EXPECT_EQ(d.Of(2), v1::DIAGNOSIS_LATENCY_BOUND);
  EXPECT_NEAR(d.monitor.Session(2).share, 1.0, 0.01);
  EXPECT_NEAR(d.monitor.decode_busy(0), 0.95, 0.01);
  EXPECT_NEAR(d.monitor.decode_busy(1), 0.2, 0.01);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(d.monitor.Autotune({2, 2}, {4, 4}, 64));
  auto grow = d.monitor.Autotune({2, 2}, {4, 4}, 64);
  ASSERT_TRUE(grow.has_value());
  EXPECT_EQ(grow->pool, "decode");
  EXPECT_EQ(grow->node, 0);
  EXPECT_EQ(grow->threads, 3);
  EXPECT_EQ(grow->why, "a session is decode-bound on node 0");
  // At node 0's limit nothing grows; node 1's consumer-bound session lets
  // node 1 shrink.
  d.RunNodes(15, {0.95, 0.3}, 0.1, {busy, {100, 0.0, 0.01, 0.1, 1.0, 1}});
  for (int i = 0; i < 3; ++i) d.monitor.Autotune({4, 2}, {4, 4}, 64);
  auto shrink = d.monitor.Autotune({4, 2}, {4, 4}, 64);
  ASSERT_TRUE(shrink.has_value());
  EXPECT_EQ(shrink->node, 1);
  EXPECT_EQ(shrink->threads, 1);
}

TEST(LoadMonitorTest, NamesForPeople) {
  EXPECT_EQ(DiagnosisName(v1::DIAGNOSIS_STARVED_BY_FAIR_SHARE), "starved-by-fair-share");
  EXPECT_EQ(DiagnosisName(v1::DIAGNOSIS_WARMING_UP), "warming-up");
}

// Producing sessions split their node's threads by weight; an idle one is
// counted with them for its own share (so it can start), not against them.
TEST(LoadMonitorTest, FairThreadsSplitEachNodeByWeight) {
  Driver d;
  d.decode = {{8, 0}, {4, 0}};
  Driver::Rates idle;
  idle.samples = 0;
  Driver::Rates far;
  far.node = 1;
  d.Run(2, 0.5, 0.1, {{}, {}, idle, far});  // Ids 1, 2 (busy), 3 (idle); 4 on node 1.
  const std::vector<double> fair = d.monitor.FairThreads(
      {8, 4}, {{1, 0, 1}, {2, 0, 3}, {3, 0, 4}, {4, 1, 2}});
  ASSERT_EQ(fair.size(), 4u);
  EXPECT_DOUBLE_EQ(fair[0], 8.0 * 1 / 4);        // 1 of the producing 1 + 3.
  EXPECT_DOUBLE_EQ(fair[1], 8.0 * 3 / 4);
  EXPECT_DOUBLE_EQ(fair[2], 8.0 * 4 / (4 + 4));  // Idle: counted with them.
  EXPECT_DOUBLE_EQ(fair[3], 4.0);                // Alone on node 1.
  EXPECT_TRUE(d.monitor.FairThreads({8, 4}, {}).empty());
}

// Users first: a user's sessions share its part by weight, whatever their
// number and priorities; another user's lone session gets the other half.
TEST(LoadMonitorTest, FairThreadsSplitByUserFirst) {
  Driver d;
  d.decode = {{8, 0}};
  d.Run(2, 0.5, 0.1, {{}, {}, {}, {}});  // Ids 1..4, all producing.
  const std::vector<double> fair = d.monitor.FairThreads(
      {8}, {{1, 0, 16, 1001}, {2, 0, 16, 1001}, {3, 0, 16, 1001}, {4, 0, 1, 1002}});
  ASSERT_EQ(fair.size(), 4u);
  EXPECT_DOUBLE_EQ(fair[0], 4.0 / 3);
  EXPECT_DOUBLE_EQ(fair[3], 4.0);
  // A session of a third user that is not producing yet: counted with them.
  const std::vector<double> more = d.monitor.FairThreads(
      {8}, {{1, 0, 16, 1001}, {4, 0, 1, 1002}, {5, 0, 1, 1003}});
  EXPECT_DOUBLE_EQ(more[2], 8.0 / 3);
}

}  // namespace
}  // namespace stoker
