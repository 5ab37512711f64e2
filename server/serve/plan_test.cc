#include "server/serve/plan.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace stoker {
namespace {

PlanSpec Spec(uint64_t n, uint32_t b, uint32_t rank = 0, uint32_t world = 1) {
  PlanSpec s;
  s.num_samples = n;
  s.batch_size = b;
  s.rank = rank;
  s.world_size = world;
  return s;
}

TEST(PlanTest, BatchCountsFollowDataLoaderSemantics) {
  auto p = EpochPlan::Create(Spec(10, 4));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->batches_per_epoch(), 3u);
  EXPECT_EQ(p->samples_per_epoch(), 10u);
  EXPECT_EQ(p->RankOrder(0), (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  PlanSpec s = Spec(10, 4);
  s.drop_last = true;
  p = EpochPlan::Create(s);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->batches_per_epoch(), 2u);
  EXPECT_EQ(p->samples_per_epoch(), 8u);
  EXPECT_EQ(p->RankOrder(0).size(), 8u);
}

TEST(PlanTest, InvalidSpecs) {
  EXPECT_EQ(EpochPlan::Create(Spec(10, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EpochPlan::Create(Spec(10, 2, 2, 2)).status().code(),
            absl::StatusCode::kInvalidArgument);
  PlanSpec s = Spec(3, 4);
  s.drop_last = true;
  EXPECT_EQ(EpochPlan::Create(s).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(PlanTest, ShuffleIsDeterministicPermutationPerEpochAndSeed) {
  PlanSpec s = Spec(1000, 10);
  s.shuffle = true;
  s.seed = 5;
  auto p = EpochPlan::Create(s);
  ASSERT_TRUE(p.ok());
  auto e0 = p->RankOrder(0), e0b = p->RankOrder(0), e1 = p->RankOrder(1);
  EXPECT_EQ(e0, e0b);
  EXPECT_NE(e0, e1);
  std::vector<uint64_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  s.seed = 6;
  EXPECT_NE(EpochPlan::Create(s)->RankOrder(0), e0);
}

TEST(PlanTest, RanksCoverEpochExactlyOnceOrPadLikeDistributedSampler) {
  for (uint64_t n : {12u, 13u}) {
    std::map<uint64_t, int> seen;
    uint64_t per_rank = 0;
    for (uint32_t r = 0; r < 3; ++r) {
      PlanSpec s = Spec(n, 2, r, 3);
      s.shuffle = true;
      s.seed = 9;
      auto p = EpochPlan::Create(s);
      ASSERT_TRUE(p.ok());
      if (r == 0) per_rank = p->samples_per_epoch();
      EXPECT_EQ(p->samples_per_epoch(), per_rank);  // Equal across ranks.
      for (uint64_t i : p->RankOrder(4)) seen[i]++;
    }
    EXPECT_EQ(seen.size(), n);  // Every sample delivered.
    int dup = 0;
    for (auto& [i, c] : seen) dup += c - 1;
    EXPECT_EQ(dup, n % 3 == 0 ? 0 : 3 - static_cast<int>(n % 3));
  }
}

TEST(PlanTest, AWindowedFirstEpochShufflesEachWindowInTurn) {
  PlanSpec s = Spec(100, 8);
  s.shuffle = true;
  s.seed = 3;
  s.first_epoch_windows = {40, 40, 20};
  auto p = EpochPlan::Create(s);
  ASSERT_TRUE(p.ok()) << p.status();
  const std::vector<uint64_t> e0 = p->RankOrder(0);
  ASSERT_EQ(e0.size(), 100u);
  // Each window's samples, and only those, in its stretch; shuffled there.
  for (auto [first, size] : {std::pair<uint64_t, uint64_t>{0, 40}, {40, 40}, {80, 20}}) {
    std::vector<uint64_t> part(e0.begin() + first, e0.begin() + first + size);
    std::vector<uint64_t> sorted = part;
    std::sort(sorted.begin(), sorted.end());
    for (uint64_t i = 0; i < size; ++i) ASSERT_EQ(sorted[i], first + i);
    EXPECT_NE(part, sorted) << "window at " << first;
  }
  EXPECT_EQ(p->RankOrder(0), e0);
  // Later epochs draw the whole permutation, as without windows.
  PlanSpec whole = s;
  whole.first_epoch_windows.clear();
  EXPECT_EQ(p->RankOrder(1), EpochPlan::Create(whole)->RankOrder(1));
  EXPECT_NE(EpochPlan::Create(whole)->RankOrder(0), e0);
  // Another seed, another order within the windows.
  s.seed = 4;
  EXPECT_NE(EpochPlan::Create(s)->RankOrder(0), e0);
  // Not shuffled: the identity, windows or not.
  s.shuffle = false;
  const std::vector<uint64_t> identity = EpochPlan::Create(s)->RankOrder(0);
  for (uint64_t i = 0; i < 100; ++i) ASSERT_EQ(identity[i], i);
  // Ranks still take every sample once: each its share of every window.
  std::map<uint64_t, int> seen;
  for (uint32_t r = 0; r < 4; ++r) {
    PlanSpec ranked = Spec(100, 5, r, 4);
    ranked.shuffle = true;
    ranked.first_epoch_windows = {40, 40, 20};
    const std::vector<uint64_t> mine = EpochPlan::Create(ranked)->RankOrder(0);
    ASSERT_EQ(mine.size(), 25u);
    for (uint64_t k = 0; k < 10; ++k) EXPECT_LT(mine[k], 40u);  // First window first.
    for (uint64_t i : mine) seen[i]++;
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(PlanTest, TheFirstEpochIsItsWindowsOrdersInTurn) {
  // What a streamed opening draws from, window by window, before the
  // dataset's size is known: the same samples as the whole plan.
  for (bool shuffle : {true, false}) {
    PlanSpec s = Spec(100, 8);
    s.shuffle = shuffle;
    s.seed = 9;
    s.first_epoch_windows = {1, 9, 40, 50};
    std::vector<uint64_t> pieces;
    uint64_t first = 0;
    for (size_t w = 0; w < s.first_epoch_windows.size(); ++w) {
      AppendWindowOrder(s, w, first, s.first_epoch_windows[w], &pieces);
      first += s.first_epoch_windows[w];
    }
    EXPECT_EQ(EpochPlan::Create(s)->RankOrder(0), pieces);
  }
}

TEST(PlanTest, TheShuffledOrderIsPinned) {
  // The canonical order: resumed runs and checksums depend on it, so no
  // change may move it.
  PlanSpec s = Spec(12, 4);
  s.shuffle = true;
  s.seed = 5;
  const std::vector<uint64_t> e0 = {0, 6, 4, 3, 11, 5, 7, 10, 9, 8, 2, 1};
  const std::vector<uint64_t> e1 = {4, 8, 0, 3, 9, 11, 7, 10, 1, 5, 2, 6};
  EXPECT_EQ(EpochPlan::Create(s)->RankOrder(0), e0);
  EXPECT_EQ(EpochPlan::Create(s)->RankOrder(1), e1);
  // One window is the same order.
  s.first_epoch_windows = {12};
  EXPECT_EQ(EpochPlan::Create(s)->RankOrder(0), e0);
  EXPECT_EQ(EpochPlan::Create(s)->RankOrder(1), e1);
  // 120 partitions and the default exchange: the first positions of epoch 3.
  s = Spec(2400, 6);
  s.shuffle = true;
  s.seed = 5;
  EXPECT_EQ(EpochPlan::Create(s)->Batch(3, 0, 0), (std::vector<uint64_t>{1766, 596, 2080, 717, 332, 430}));
}

// The samples of each global step of `epoch` (batch_size x world samples:
// every rank's batch b), as sets: what the world trains on, step by step.
std::vector<std::set<uint64_t>> Steps(uint64_t n, uint32_t batch, uint32_t world,
                                      uint64_t epoch, uint64_t from = 0) {
  std::vector<std::set<uint64_t>> steps;
  for (uint32_t r = 0; r < world; ++r) {
    PlanSpec s = Spec(n, batch, r, world);
    s.shuffle = true;
    s.seed = 9;
    auto p = EpochPlan::Create(s);
    EXPECT_TRUE(p.ok()) << p.status();
    steps.resize(p->batches_per_epoch(from));
    for (uint64_t b = 0; b < steps.size(); ++b) {
      for (uint64_t i : p->Batch(epoch, from, b)) steps[b].insert(i);
    }
  }
  return steps;
}

TEST(PlanTest, EveryWorldSizeReadsTheSameGlobalSteps) {
  // 2,880 samples in global steps of 24: the same 120 steps at any world
  // size dividing 24, each sample once.
  for (uint64_t epoch : {0u, 1u}) {
    const std::vector<std::set<uint64_t>> one = Steps(2880, 24, 1, epoch);
    ASSERT_EQ(one.size(), 120u);
    std::set<uint64_t> all;
    for (const auto& step : one) {
      EXPECT_EQ(step.size(), 24u);
      all.insert(step.begin(), step.end());
    }
    EXPECT_EQ(all.size(), 2880u);
    for (uint32_t world : {2u, 3u, 4u, 6u, 8u, 12u}) {
      EXPECT_EQ(Steps(2880, 24 / world, world, epoch), one) << "world " << world;
    }
  }
}

TEST(PlanTest, ARunResumedAtAnotherWorldSizeGoesOnWhereItStopped) {
  // Stopped after 37 steps of 24 at world size 4, resumed at 6.
  const std::vector<std::set<uint64_t>> whole = Steps(2880, 6, 4, 1);
  const uint64_t consumed = 37 * 24;
  // A constant global batch (4 a rank): the same steps as the run that
  // was not stopped.
  const std::vector<std::set<uint64_t>> resumed = Steps(2880, 4, 6, 1, consumed);
  ASSERT_EQ(resumed.size(), whole.size() - 37);
  for (size_t s = 0; s < resumed.size(); ++s) EXPECT_EQ(resumed[s], whole[37 + s]) << s;
  // The per-rank batch kept (steps of 36): every sample the stopped run
  // did not read, once.
  std::set<uint64_t> seen;
  for (size_t s = 0; s < 37; ++s) seen.insert(whole[s].begin(), whole[s].end());
  uint64_t count = seen.size();
  for (const auto& step : Steps(2880, 6, 6, 1, consumed)) {
    seen.insert(step.begin(), step.end());
    count += step.size();
  }
  EXPECT_EQ(seen.size(), 2880u);
  EXPECT_EQ(count, 2880u);
}

TEST(PlanTest, WindowsThatDoNotCoverTheSamplesAreRefused) {
  PlanSpec s = Spec(100, 8);
  s.first_epoch_windows = {40, 40};
  EXPECT_EQ(EpochPlan::Create(s).status().code(), absl::StatusCode::kInternal);
}

TEST(PlanTest, TheOrderKeyIsTheWorldsNotARanksAndNamesTheExchangesRule) {
  PlanSpec s;
  s.shuffle = true;
  s.seed = 7;
  s.exchange = 0;
  const uint64_t none = OrderKey(s, "pipe", true);
  EXPECT_EQ(OrderKey(s, "pipe", false), none);  // No exchange: no rule.
  s.world_size = 6;
  s.rank = 5;
  s.batch_size = 32;
  s.num_samples = 1000;
  EXPECT_EQ(OrderKey(s, "pipe", true), none);
  s.exchange = -0.0f;
  EXPECT_EQ(OrderKey(s, "pipe", true), none);
  s.exchange = 0.05f;
  const uint64_t by_count = OrderKey(s, "pipe", false), by_bytes = OrderKey(s, "pipe", true);
  EXPECT_NE(by_count, none);
  EXPECT_NE(by_bytes, by_count);
  EXPECT_NE(OrderKey(s, "other", true), by_bytes);
  // Unshuffled, the exchange orders nothing: no rule either.
  s.shuffle = false;
  EXPECT_EQ(OrderKey(s, "pipe", true), OrderKey(s, "pipe", false));
  // Pinned, as the releases before the rule made them: a state saved
  // without an exchange, or with one over files exchanged by count, still
  // loads; one saved with an exchange over a store's objects does not.
  EXPECT_EQ(none, 11700618501511184817u);
  EXPECT_EQ(by_count, 645134925937857925u);
}

}  // namespace
}  // namespace stoker
