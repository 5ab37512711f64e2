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

TEST(PlanTest, TheShuffledOrderIsTheOneSessionsAlwaysGot) {
  // What the daemon delivered before windows existed: one window, or
  // none, must not change it (resumed runs and checksums depend on it).
  PlanSpec s = Spec(12, 4);
  s.shuffle = true;
  s.seed = 5;
  const std::vector<uint64_t> e0 = {8, 5, 1, 7, 11, 3, 0, 4, 9, 10, 2, 6};
  const std::vector<uint64_t> e1 = {3, 6, 5, 9, 0, 2, 1, 11, 7, 10, 8, 4};
  EXPECT_EQ(EpochPlan::Create(s)->RankOrder(0), e0);
  EXPECT_EQ(EpochPlan::Create(s)->RankOrder(1), e1);
  s.first_epoch_windows = {12};
  EXPECT_EQ(EpochPlan::Create(s)->RankOrder(0), e0);
  EXPECT_EQ(EpochPlan::Create(s)->RankOrder(1), e1);
}

TEST(PlanTest, WindowsThatDoNotCoverTheSamplesAreRefused) {
  PlanSpec s = Spec(100, 8);
  s.first_epoch_windows = {40, 40};
  EXPECT_EQ(EpochPlan::Create(s).status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace stoker
