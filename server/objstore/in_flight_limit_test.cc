#include "server/objstore/in_flight_limit.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace stoker {
namespace {

// A store that serves one request at a time in `service`, `latency` away,
// and a client that keeps the limit in flight: with L in flight the first
// byte comes after max(latency + service, L x service). The store is
// saturated from L* = latency / service + 1 on.
struct Store {
  absl::Duration latency, service;
  int in_flight = 0;

  void Answer(InFlightLimit& l) {
    in_flight = std::max(in_flight, l.limit());
    const absl::Duration first_byte = std::max(latency + service, in_flight * service);
    --in_flight;
    l.Answered(first_byte, in_flight, true);
  }
};

TEST(InFlightLimitTest, AStoreThatScalesGetsTheCeilingInARoundTripOrTwo) {
  InFlightLimit l(4, 16, 64);
  EXPECT_EQ(l.limit(), 16);
  for (int i = 0; i < 48; ++i) l.Answered(absl::Milliseconds(50), l.limit(), true);
  EXPECT_EQ(l.limit(), 64);  // One more per answer.
  EXPECT_EQ(l.queued(), 0);
}

TEST(InFlightLimitTest, ItGrowsOnlyWhileRequestsWait) {
  InFlightLimit l(4, 16, 64);
  for (int i = 0; i < 100; ++i) l.Answered(absl::Milliseconds(50), 16, false);
  EXPECT_EQ(l.limit(), 16);
}

TEST(InFlightLimitTest, ASaturatedStoreKeepsAFewQueued) {
  Store store{absl::Milliseconds(50), absl::Milliseconds(2)};
  InFlightLimit l(4, 16, 64);
  int lowest = 64, highest = 0, probes = 0;
  for (int i = 0; i < 20000; ++i) {
    const int before = l.limit();
    store.Answer(l);
    if (l.limit() == 4 && before > 4) ++probes;
    if (i >= 10000 && l.limit() > 4) {  // Outside the probes.
      lowest = std::min(lowest, l.limit());
      highest = std::max(highest, l.limit());
    }
  }
  // L* = 26: past it, requests only queue; it keeps a few queued.
  EXPECT_GE(lowest, 26 + 1);
  EXPECT_LE(highest, 26 + InFlightLimit::kMostQueued + 2);
  EXPECT_GE(probes, 20000 / InFlightLimit::kProbeEvery - 2);
}

TEST(InFlightLimitTest, AProbeDrainsToTheFloorThenRestores) {
  InFlightLimit l(4, 16, 64);
  for (int i = 0; i < 48; ++i) l.Answered(absl::Milliseconds(50), 64, true);
  ASSERT_EQ(l.limit(), 64);
  for (int i = 48; i < InFlightLimit::kProbeEvery - 1; ++i) {
    l.Answered(absl::Milliseconds(50), 64, true);
  }
  EXPECT_EQ(l.limit(), 64);
  l.Answered(absl::Milliseconds(50), 63, true);  // The probe starts.
  EXPECT_EQ(l.limit(), 4);
  for (int in_flight = 62; in_flight > 4; --in_flight) {
    l.Answered(absl::Milliseconds(50), in_flight, true);  // Draining.
    EXPECT_EQ(l.limit(), 4);
  }
  l.Answered(absl::Milliseconds(50), 4, true);  // Drained.
  for (int i = 0; i < 3; ++i) l.Answered(absl::Milliseconds(20), 4, true);
  EXPECT_EQ(l.limit(), 4);
  l.Answered(absl::Milliseconds(30), 4, true);  // The 4th: restored.
  EXPECT_EQ(l.limit(), 64);
  // The base is now 20 ms: 50 ms answers are a queue of 64 x 0.6.
  for (int i = 0; i < 8; ++i) l.Answered(absl::Milliseconds(50), 64, true);
  EXPECT_GT(l.queued(), 30);
}

TEST(InFlightLimitTest, AThrottleHalvesItAndEndsTheDoubling) {
  InFlightLimit l(4, 16, 64);
  for (int i = 0; i < 48; ++i) l.Answered(absl::Milliseconds(50), l.limit(), true);
  l.Throttled();
  EXPECT_EQ(l.limit(), 32);
  for (int i = 0; i < 31; ++i) l.Answered(absl::Milliseconds(50), l.limit(), true);
  EXPECT_EQ(l.limit(), 32);  // One window of 32 answers: one more.
  l.Answered(absl::Milliseconds(50), l.limit(), true);
  EXPECT_EQ(l.limit(), 33);
  for (int i = 0; i < 10; ++i) l.Throttled();
  EXPECT_EQ(l.limit(), 4);  // Never under the floor.
}

TEST(InFlightLimitTest, APathThatGotSlowerIsTheNewBase) {
  InFlightLimit l(4, 16, 64);
  for (int i = 0; i < 300; ++i) l.Answered(absl::Milliseconds(5), l.limit(), true);
  EXPECT_EQ(l.limit(), 64);
  // Every answer now 50 ms: against the old base that looks like a queue,
  // and the limit shrinks, until the base window turns over.
  for (int i = 0; i < 300; ++i) l.Answered(absl::Milliseconds(50), l.limit(), true);
  EXPECT_LT(l.limit(), 64);
  for (int i = 0; i < 3000; ++i) l.Answered(absl::Milliseconds(50), l.limit(), true);
  EXPECT_EQ(l.limit(), 64);
  EXPECT_EQ(l.queued(), 0);
}

}  // namespace
}  // namespace stoker
