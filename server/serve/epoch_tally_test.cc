#include "server/serve/epoch_tally.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(EpochTallyTest, CountsPerEpochAndInTotal) {
  EpochTally t;
  t.Begin(3);  // A resumed session's first epoch.
  t.Add(3, 100);
  t.Add(3, 50);
  t.Begin(4);
  t.Add(3, 7);  // The last reads of epoch 3 after 4 began.
  t.Begin(4);   // Again: left as it is.
  t.Begin(5);   // Served from the caches: zero.
  const std::vector<EpochTally::Counts> e = t.epochs();
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].epoch, 3u);
  EXPECT_EQ(e[0].requests, 3u);
  EXPECT_EQ(e[0].bytes, 157u);
  EXPECT_EQ(e[1].epoch, 4u);
  EXPECT_EQ(e[1].requests, 0u);
  EXPECT_EQ(e[2].epoch, 5u);
  EXPECT_EQ(e[2].requests, 0u);
  EXPECT_EQ(t.total().requests, 3u);
  EXPECT_EQ(t.total().bytes, 157u);
}

TEST(EpochTallyTest, KeepsTheLastEpochsAndCountsOthersInTheTotal) {
  EpochTally t;
  for (uint64_t e = 0; e < EpochTally::kEpochs + 4; ++e) t.Begin(e);
  t.Add(0, 10);  // No longer kept.
  t.Add(99, 10);  // Not begun.
  const std::vector<EpochTally::Counts> e = t.epochs();
  ASSERT_EQ(e.size(), EpochTally::kEpochs);
  EXPECT_EQ(e.front().epoch, 4u);
  for (const EpochTally::Counts& c : e) EXPECT_EQ(c.requests, 0u);
  EXPECT_EQ(t.total().requests, 2u);
  EXPECT_EQ(t.total().bytes, 20u);
}

TEST(EpochTallyTest, ManyThreadsAddExactly) {
  EpochTally t;
  t.Begin(0);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&t] {
      for (int k = 0; k < 1000; ++k) t.Add(0, 3);
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(t.epochs()[0].requests, 4000u);
  EXPECT_EQ(t.total().bytes, 12000u);
}

}  // namespace
}  // namespace stoker
