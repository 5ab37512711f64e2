#include "server/objstore/in_flight_limit.h"

#include <algorithm>
#include <deque>

#include "gtest/gtest.h"

namespace stoker {
namespace {

// A store that serves one request at a time in `service`, `latency` away,
// first come first served, and a client that keeps the limit in flight: a
// request sent with W in flight (itself included) has its first byte after
// max(latency + service, W x service), and answers come every
// max(service, that / W). The store is saturated from
// L* = latency / service + 1 on.
struct Store {
  absl::Duration latency, service;
  absl::Time now = absl::UnixEpoch();
  std::deque<int> sent_with;  // Of the requests in flight, oldest first.

  void Answer(InFlightLimit& l) {
    while (static_cast<int>(sent_with.size()) < l.limit()) {
      sent_with.push_back(static_cast<int>(sent_with.size()) + 1);
    }
    const int w = sent_with.front();
    sent_with.pop_front();
    const absl::Duration first_byte = std::max(latency + service, w * service);
    now += std::max(service, first_byte / (static_cast<int>(sent_with.size()) + 1));
    l.Answered(first_byte, w, true, now);
  }
};

absl::Time At(int ms) { return absl::UnixEpoch() + absl::Milliseconds(ms); }

TEST(InFlightLimitTest, AStoreThatScalesGetsTheCeilingInARoundTripOrTwo) {
  InFlightLimit l(4, 16, 64);
  EXPECT_EQ(l.limit(), 16);
  for (int i = 0; i < 48; ++i) l.Answered(absl::Milliseconds(50), l.limit(), true, At(i));
  EXPECT_EQ(l.limit(), 64);  // One more per answer.
  EXPECT_EQ(l.queued(), 0);
}

TEST(InFlightLimitTest, ItGrowsOnlyWhileRequestsWait) {
  InFlightLimit l(4, 16, 64);
  for (int i = 0; i < 100; ++i) l.Answered(absl::Milliseconds(50), 16, false, At(i));
  EXPECT_EQ(l.limit(), 16);
}

TEST(InFlightLimitTest, ASaturatedStoreKeepsAFewQueued) {
  Store store{absl::Milliseconds(50), absl::Milliseconds(2)};
  InFlightLimit l(4, 16, 64);
  int lowest = 64, highest = 0, probes = 0;
  for (int i = 0; i < 40000; ++i) {
    const bool was = l.probing();
    store.Answer(l);
    probes += !was && l.probing();
    if (i >= 20000 && !l.probing()) {
      lowest = std::min(lowest, l.limit());
      highest = std::max(highest, l.limit());
    }
  }
  // L* = 26: past it, requests only queue; it keeps a few queued and never
  // falls back to where the store idles.
  EXPECT_GE(lowest, 26 + 1);
  EXPECT_LE(highest, 26 + InFlightLimit::kMostQueued + 2);
  // 80 s of answers: a probe each 10 s.
  EXPECT_GE(probes, 6);
  EXPECT_LE(probes, 8);
}

TEST(InFlightLimitTest, AThrottleHalvesItAndEndsTheDoubling) {
  InFlightLimit l(4, 16, 64);
  for (int i = 0; i < 48; ++i) l.Answered(absl::Milliseconds(50), 64, true, At(i));
  l.Throttled();
  EXPECT_EQ(l.limit(), 32);
  for (int i = 0; i < 31; ++i) l.Answered(absl::Milliseconds(50), 32, true, At(100 + i));
  EXPECT_EQ(l.limit(), 32);  // One window of 32 answers: one more.
  l.Answered(absl::Milliseconds(50), 32, true, At(200));
  EXPECT_EQ(l.limit(), 33);
  for (int i = 0; i < 10; ++i) l.Throttled();
  EXPECT_EQ(l.limit(), 4);  // Never under the floor.
}

TEST(InFlightLimitTest, AProbeMeasuresAtLowLoadThenRestores) {
  InFlightLimit l(4, 16, 64);
  for (int i = 0; i < 48; ++i) l.Answered(absl::Milliseconds(20), 64, true, At(i));
  ASSERT_EQ(l.limit(), 64);
  // 10 s after the first answer: the probe.
  l.Answered(absl::Milliseconds(20), 64, true, At(10000));
  EXPECT_TRUE(l.probing());
  EXPECT_EQ(l.limit(), 4);
  // Answers of requests sent before it, queued ones, measure nothing.
  for (int i = 0; i < 20; ++i) l.Answered(absl::Milliseconds(90), 64, true, At(10001 + i));
  EXPECT_TRUE(l.probing());
  // Eight sent at low load: the base is theirs (the path got slower), and
  // the limit is back.
  for (int i = 0; i < InFlightLimit::kBaseSamples; ++i) {
    l.Answered(absl::Milliseconds(50), 4, true, At(10030 + i));
  }
  EXPECT_FALSE(l.probing());
  EXPECT_EQ(l.limit(), 64);
  for (int i = 0; i < 40; ++i) l.Answered(absl::Milliseconds(50), 64, false, At(10040 + i));
  EXPECT_NEAR(l.queued(), 0, 0.5);
}

TEST(InFlightLimitTest, AProbeThatMeasuresNothingEndsInTime) {
  InFlightLimit l(4, 16, 64);
  for (int i = 0; i < 48; ++i) l.Answered(absl::Milliseconds(20), 64, true, At(i));
  l.Answered(absl::Milliseconds(20), 64, true, At(10000));
  ASSERT_TRUE(l.probing());
  l.Throttled();  // Halves what it restores.
  l.Tick(At(10000 + 79));  // 4 rtt = 80 ms.
  EXPECT_TRUE(l.probing());
  l.Tick(At(10000 + 80));
  EXPECT_FALSE(l.probing());
  EXPECT_EQ(l.limit(), 32);
}

TEST(InFlightLimitTest, APathThatGotSlowerIsMeasuredAtTheNextProbe) {
  Store fast{absl::Milliseconds(5), absl::Microseconds(10)};
  InFlightLimit l(4, 16, 64);
  for (int i = 0; i < 300; ++i) fast.Answer(l);
  EXPECT_EQ(l.limit(), 64);
  // Every answer now 50 ms away, the store idle: against the old base that
  // looks like a queue, and the limit shrinks, until a probe measures the
  // new base; then it grows back.
  Store slower{absl::Milliseconds(50), absl::Microseconds(10), fast.now};
  for (int i = 0; i < 30000; ++i) slower.Answer(l);
  EXPECT_EQ(l.limit(), 64);
  EXPECT_NEAR(l.queued(), 0, 0.5);
}

}  // namespace
}  // namespace stoker
