#include "server/pool/background_work.h"

#include <atomic>
#include <stdexcept>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(BackgroundWorkTest, StopWaitsForEveryWorkAndRefusesMore) {
  BackgroundWork bg;
  absl::Notification go;
  std::atomic<int> ended{0};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(bg.Start([&] {
      go.WaitForNotification();
      ended.fetch_add(1);
    }));
  }
  EXPECT_EQ(bg.running(), 3u);
  go.Notify();
  bg.Stop();
  EXPECT_EQ(ended.load(), 3);
  EXPECT_EQ(bg.running(), 0u);
  EXPECT_FALSE(bg.Start([&] { ended.fetch_add(1); }));
  EXPECT_EQ(ended.load(), 3);
}

TEST(BackgroundWorkTest, AThrowIsLoggedNotFatalAndEndedThreadsAreJoined) {
  BackgroundWork bg;
  absl::Notification thrown;
  ASSERT_TRUE(bg.Start([&] {
    thrown.Notify();
    throw std::runtime_error("boom");
  }));
  thrown.WaitForNotification();
  while (bg.running() != 0) std::this_thread::yield();  // Its flag, set as it ends.
  std::atomic<bool> ran{false};
  ASSERT_TRUE(bg.Start([&] { ran.store(true); }));  // Joins the ended one.
  bg.Stop();
  EXPECT_TRUE(ran.load());
}

}  // namespace
}  // namespace stoker
