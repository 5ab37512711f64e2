#include "server/access/call_budget.h"

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(CallBudgetTest, PerUserAndTotalLimitsRefuseAtOnce) {
  CallBudget budget(/*total=*/3, /*per_user=*/2);
  EXPECT_TRUE(budget.Acquire(1000).ok());
  EXPECT_TRUE(budget.Acquire(1000).ok());
  absl::Status third = budget.Acquire(1000);
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(third.message().find("uid 1000 already has 2"), std::string::npos) << third;
  EXPECT_TRUE(budget.Acquire(2000).ok());  // Another user still gets in.
  absl::Status full = budget.Acquire(3000);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("the daemon already has 3"), std::string::npos) << full;
  EXPECT_EQ(budget.in_flight(), 3);
  budget.Release(1000);
  EXPECT_TRUE(budget.Acquire(3000).ok());
  budget.Release(7);  // Never acquired: ignored.
  EXPECT_EQ(budget.in_flight(), 3);
  budget.Release(1000);
  budget.Release(2000);
  budget.Release(3000);
  EXPECT_EQ(budget.in_flight(), 0);
}

}  // namespace
}  // namespace stoker
