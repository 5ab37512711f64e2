#include "util/cancellation.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(CancellationTest, SubscribersRunOnceWhenRaised) {
  Cancellation c;
  int runs = 0, forgotten = 0;
  c.Subscribe([&] { ++runs; });
  const Cancellation::Id id = c.Subscribe([&] { ++forgotten; });
  EXPECT_NE(id, 0u);
  c.Unsubscribe(id);
  EXPECT_FALSE(c.cancelled());
  EXPECT_EQ(runs, 0);
  c.Cancel();
  c.Cancel();  // Again: nothing.
  EXPECT_TRUE(c.cancelled());
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(forgotten, 0);
}

TEST(CancellationTest, ASubscriptionAfterTheFlagRunsAtOnce) {
  Cancellation c;
  c.Cancel();
  int runs = 0;
  EXPECT_EQ(c.Subscribe([&] { ++runs; }), 0u);
  EXPECT_EQ(runs, 1);
  c.Unsubscribe(0);  // Nothing to forget.
}

TEST(CancellationTest, AWaiterOnAnotherThreadIsWoken) {
  Cancellation c;
  absl::Notification woken;
  const Cancellation::Id id = c.Subscribe([&] { woken.Notify(); });
  std::thread owner([&] { c.Cancel(); });
  woken.WaitForNotification();
  owner.join();
  c.Unsubscribe(id);
  EXPECT_TRUE(c.cancelled());
}

}  // namespace
}  // namespace stoker
