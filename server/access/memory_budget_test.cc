#include "server/access/memory_budget.h"

#include <atomic>
#include <memory>
#include <thread>

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

constexpr absl::Duration kLong = absl::Minutes(5);

// Wait blocks until tokens come back, refuses at once what could never
// fit, and gives up after its timeout.
TEST(MemoryBudgetTest, WaitTakesRoomAsItIsGivenBack) {
  MemoryBudget budget(/*total=*/100, /*per_user=*/60);
  EXPECT_EQ(budget.Wait(-1, 101, kLong), nullptr);  // Over the total.
  EXPECT_NE(budget.Wait(1, 70, kLong), nullptr);  // Over the user's bound, but alone.
  std::shared_ptr<void> held = budget.Wait(1, 60, kLong);
  ASSERT_NE(held, nullptr);
  std::shared_ptr<void> other = budget.Wait(2, 40, kLong);
  ASSERT_NE(other, nullptr);
  std::atomic<bool> got{false};
  std::shared_ptr<void> waited;
  std::thread waiter([&] {
    waited = budget.Wait(1, 30, kLong);  // uid 1 has no room until `held` goes.
    got = true;
  });
  EXPECT_FALSE(got.load());  // It cannot have room yet, however long it ran.
  other.reset();  // Total room, but not uid 1's: it still waits.
  EXPECT_FALSE(got.load());
  held.reset();
  waiter.join();
  EXPECT_TRUE(got.load());
  ASSERT_NE(waited, nullptr);
  EXPECT_EQ(budget.used_by(1), 30u);
  EXPECT_EQ(budget.used(), 30u);
  std::shared_ptr<void> all = budget.Wait(2, 70, kLong);
  ASSERT_NE(all, nullptr);
  EXPECT_EQ(budget.Wait(3, 1, absl::Milliseconds(1)), nullptr);  // No room: timed out.
}

// Three users: C waits for half the total while A and B hold it all. B
// gives back and asks again for less than is then free: it waits behind
// C, which takes its room first once A gives back. Before, B's smaller
// request passed C's, and C could wait forever behind A's and B's turns.
TEST(MemoryBudgetTest, WaitsTakeTheTotalInTurn) {
  MemoryBudget budget(/*total=*/100, /*per_user=*/60);
  std::shared_ptr<void> a = budget.Charge(1, 60);
  std::shared_ptr<void> b = budget.Charge(2, 40);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::shared_ptr<void> c_got, b_got;
  std::thread c([&] { c_got = budget.Wait(3, 50, absl::Seconds(60)); });
  while (budget.waiting() < 1) std::this_thread::yield();
  b.reset();  // 40 free: not enough for C's 50.
  std::thread b2([&] { b_got = budget.Wait(2, 30, absl::Seconds(60)); });
  while (budget.waiting() < 2 && budget.used() < 90) std::this_thread::yield();
  // Both wait: B's 30 would fit, but C came first.
  EXPECT_EQ(budget.used(), 60u);
  a.reset();
  c.join();
  b2.join();
  ASSERT_NE(c_got, nullptr);
  ASSERT_NE(b_got, nullptr);
  EXPECT_EQ(budget.used_by(3), 50u);
  EXPECT_EQ(budget.used_by(2), 30u);
  // A wait its own user's share holds back holds back no one else.
  std::shared_ptr<void> own = budget.Charge(4, 10);  // 90 of 100 used.
  ASSERT_NE(own, nullptr);
  std::shared_ptr<void> held;
  std::thread over([&] { held = budget.Wait(3, 20, absl::Seconds(60)); });  // 70 > 60.
  while (budget.waiting() < 1) std::this_thread::yield();
  own.reset();
  std::shared_ptr<void> other = budget.Wait(5, 10, absl::Seconds(60));
  EXPECT_NE(other, nullptr);  // Passed uid 3's wait, which its share holds.
  c_got.reset();
  over.join();
  EXPECT_NE(held, nullptr);
}

// A request larger than its user's share runs once that user holds
// nothing. Its user's later, smaller waits queue behind it, so steady
// traffic of the same user cannot keep it from ever reaching zero; other
// users pass it.
TEST(MemoryBudgetTest, ARequestOverItsSharePassesItsOwnUsersLaterWaits) {
  MemoryBudget budget(/*total=*/1000, /*per_user=*/100);
  std::shared_ptr<void> held = budget.Charge(1, 60);
  ASSERT_NE(held, nullptr);
  std::shared_ptr<void> big;
  std::thread large([&] { big = budget.Wait(1, 150, absl::Seconds(60)); });
  while (budget.waiting() < 1) std::this_thread::yield();
  // 60 + 10 fits uid 1's share, but its large request came first.
  EXPECT_EQ(budget.Wait(1, 10, absl::ZeroDuration()), nullptr);
  EXPECT_NE(budget.Wait(2, 10, absl::ZeroDuration()), nullptr);  // Another user's.
  held.reset();
  large.join();
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(budget.used_by(1), 150u);
  EXPECT_EQ(budget.Wait(1, 10, absl::ZeroDuration()), nullptr);  // Over its share now.
  big.reset();
  EXPECT_NE(budget.Wait(1, 10, absl::ZeroDuration()), nullptr);
}

TEST(MemoryBudgetTest, ACancelledWaitEndsWithoutRoom) {
  MemoryBudget b(10, 10);
  std::shared_ptr<void> full = b.Charge(1, 10);
  ASSERT_NE(full, nullptr);
  Cancellation cancel;
  std::shared_ptr<void> got = std::make_shared<int>(0);
  std::thread waiter(
      [&] { got = b.Wait(2, 5, absl::InfiniteDuration(), &cancel); });
  cancel.Cancel();  // Before or after the wait began: it ends either way.
  waiter.join();
  EXPECT_EQ(got, nullptr);
  EXPECT_EQ(b.used(), 10u);
  EXPECT_EQ(b.Wait(2, 5, absl::ZeroDuration(), &cancel), nullptr);  // Raised: at once.
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
