#include "server/memory_budget.h"

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(MemoryBudgetTest, PerUserAndTotalAndGivenBackWhenDropped) {
  MemoryBudget budget(/*total=*/100, /*per_user=*/40);
  std::shared_ptr<void> a = budget.Charge(1, 30);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(budget.Charge(1, 11), nullptr);  // 41 > 40 for uid 1.
  std::shared_ptr<void> a2 = budget.Charge(1, 10);
  ASSERT_NE(a2, nullptr);
  EXPECT_EQ(budget.used_by(1), 40u);
  std::shared_ptr<void> b = budget.Charge(2, 40);
  ASSERT_NE(b, nullptr);
  std::shared_ptr<void> admin = budget.Charge(-1, 20);  // Only the total binds.
  ASSERT_NE(admin, nullptr);
  EXPECT_EQ(budget.Charge(3, 1), nullptr);  // 100 of 100 used.
  EXPECT_EQ(budget.used(), 100u);
  std::shared_ptr<void> copy = a;  // A token shared by two sources.
  a.reset();
  EXPECT_EQ(budget.used(), 100u);
  copy.reset();
  EXPECT_EQ(budget.used(), 70u);
  EXPECT_EQ(budget.used_by(1), 10u);
  EXPECT_NE(budget.Charge(3, 30), nullptr);  // Dropped at once: given back.
  EXPECT_EQ(budget.used(), 70u);
  EXPECT_EQ(budget.Charge(5, UINT64_MAX), nullptr);  // No wrap.
}

TEST(MemoryBudgetTest, TokensMayOutliveTheBudget) {
  std::shared_ptr<void> token;
  {
    MemoryBudget budget(10, 0);
    token = budget.Charge(7, 10);
    ASSERT_NE(token, nullptr);
  }
  token.reset();  // Its state lives as long as the token.
}

}  // namespace
}  // namespace stoker
