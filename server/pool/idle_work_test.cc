#include "server/pool/idle_work.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(IdleWorkTest, RunsOneTaskACallInOrderAndWhatTasksPost) {
  IdleWork idle;
  std::vector<std::string> order;
  EXPECT_FALSE(idle.RunOne());
  idle.Post([&] {
    order.push_back("a");
    idle.Post([&] { order.push_back("c"); });  // A next step, queued last.
  });
  idle.Post([&] { order.push_back("b"); });
  EXPECT_EQ(idle.queued(), 2u);
  EXPECT_TRUE(idle.RunOne());
  EXPECT_EQ(order, std::vector<std::string>{"a"});
  EXPECT_TRUE(idle.RunOne());
  EXPECT_TRUE(idle.RunOne());
  EXPECT_FALSE(idle.RunOne());
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(idle.queued(), 0u);
}

TEST(IdleWorkTest, AThrowIsLoggedAndStopDropsTheRest) {
  IdleWork idle;
  int ran = 0;
  idle.Post([] { throw std::runtime_error("boom"); });
  idle.Post([&] { ++ran; });
  idle.Post([&] { ++ran; });
  EXPECT_TRUE(idle.RunOne());  // Thrown, caught, logged.
  EXPECT_TRUE(idle.RunOne());
  idle.Stop();
  idle.Post([&] { ++ran; });
  EXPECT_FALSE(idle.RunOne());
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(idle.queued(), 0u);
}

}  // namespace
}  // namespace stoker
