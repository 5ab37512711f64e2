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

}  // namespace
}  // namespace stoker
