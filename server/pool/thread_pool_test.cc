#include "server/pool/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <functional>
#include <new>
#include <stdexcept>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/poll.h"

namespace stoker {
namespace {

TEST(ThreadPoolTest, RunsEveryTaskOnceInFifoOrderWithOneWorker) {
  std::vector<int> order;
  absl::Mutex mu;
  {
    ThreadPool pool("t", 1);
    for (int i = 0; i < 100; ++i) {
      pool.Schedule([&, i] {
        absl::MutexLock lock(&mu);
        order.push_back(i);
      });
    }
  }  // Drains.
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

// Groups take turns: a session that queued 10x more work does not hold the
// pool; each gets one task per turn, in its own FIFO order, and when one
// runs dry the other has the pool. Counted in tasks, not timed.
// A task that throws ends neither its worker nor the process: the pool's
// barrier logs it and the tasks after it run.
TEST(ThreadPoolTest, ThrowingTasksDoNotStopThePool) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool("t", 1);
    pool.Schedule([] { throw std::runtime_error("boom"); });
    pool.Schedule([] { throw std::bad_alloc(); });
    for (int i = 0; i < 10; ++i) pool.Schedule([&] { ran.fetch_add(1); });
  }  // Drains.
  EXPECT_EQ(ran.load(), 10);
}

TEST(ThreadPoolTest, GroupsTakeTurnsAndKeepTheirOwnOrder) {
  std::vector<std::pair<uint64_t, int>> order;
  absl::Mutex mu;
  absl::Notification go, holding;
  {
    ThreadPool pool("t", 1);
    pool.Schedule([&] {  // Hold the worker while the rest is queued.
      holding.Notify();
      go.WaitForNotification();
    });
    holding.WaitForNotification();
    for (int i = 0; i < 1000; ++i) {
      pool.Schedule([&, i] {
        absl::MutexLock lock(&mu);
        order.push_back({7, i});
      }, 7);
    }
    for (int i = 0; i < 100; ++i) {
      pool.Schedule([&, i] {
        absl::MutexLock lock(&mu);
        order.push_back({9, i});
      }, 9);
    }
    EXPECT_EQ(pool.queued(), 1100u);
    go.Notify();
  }
  ASSERT_EQ(order.size(), 1100u);
  int seven = 0, nine = 0;
  for (int k = 0; k < 200; ++k) (order[k].first == 7 ? seven : nine)++;
  EXPECT_EQ(seven, 100);  // Equal shares while both have work...
  EXPECT_EQ(nine, 100);
  for (size_t k = 200; k < order.size(); ++k) EXPECT_EQ(order[k].first, 7u);  // ...then all.
  int next7 = 0, next9 = 0;
  for (const auto& [g, i] : order) EXPECT_EQ(i, g == 7 ? next7++ : next9++);
}

TEST(ThreadPoolTest, WeightsSetTheShares) {
  std::vector<uint64_t> order;
  absl::Mutex mu;
  absl::Notification go;
  {
    ThreadPool pool("t", 1);
    pool.Schedule([&] { go.WaitForNotification(); });
    for (int i = 0; i < 400; ++i) {
      for (uint64_t g : {1, 2}) {
        pool.Schedule([&, g] {
          absl::MutexLock lock(&mu);
          order.push_back(g);
        }, g, g == 2 ? 3 : 1);
      }
    }
    go.Notify();
  }
  int one = 0, two = 0;
  for (int k = 0; k < 400; ++k) (order[k] == 1 ? one : two)++;
  EXPECT_EQ(one, 100);  // 1 : 3 while both have work.
  EXPECT_EQ(two, 300);
}

// Users first: one user's 8 sessions of weight 16 and another user's one
// session of weight 1 get half the pool each while both have work; within
// the first user its sessions share by weight.
TEST(ThreadPoolTest, UsersShareFirstThenTheirSessionsByWeight) {
  std::vector<std::pair<int64_t, uint64_t>> order;  // (user, group)
  absl::Mutex mu;
  absl::Notification go;
  {
    ThreadPool pool("t", 1);
    pool.Schedule([&] { go.WaitForNotification(); });
    for (int i = 0; i < 200; ++i) {
      for (uint64_t g = 1; g <= 9; ++g) {
        const int64_t user = g <= 8 ? 1001 : 1002;
        const int weight = g == 1 ? 48 : g <= 8 ? 16 : 1;
        pool.Schedule([&, user, g] {
          absl::MutexLock lock(&mu);
          order.emplace_back(user, g);
        }, g, weight, user);
      }
    }
    go.Notify();
  }
  int many = 0, one = 0, first = 0, second = 0;
  for (int k = 0; k < 320; ++k) {  // One full turn of the first user's groups.
    (order[k].first == 1001 ? many : one)++;
    first += order[k].second == 1;
    second += order[k].second == 2;
  }
  EXPECT_EQ(many, 160);  // 1 : 1 while both users have work.
  EXPECT_EQ(one, 160);
  EXPECT_EQ(first, 3 * second);  // 48 : 16 within the first user.
}

TEST(ThreadPoolTest, ResizingWhileBusyLosesAndRepeatsNothing) {
  std::atomic<int> ran{0};
  std::vector<std::atomic<int>> seen(5000);
  ThreadPool pool("t", 2);
  for (int i = 0; i < 5000; ++i) {
    pool.Schedule([&, i] {
      seen[i].fetch_add(1);
      ran.fetch_add(1);
    });
    if (i % 500 == 0) pool.Resize(1 + (i / 500) % 4);
  }
  pool.Resize(3);
  EXPECT_EQ(pool.size(), 3);
  ASSERT_TRUE(testing::PollUntil([&] { return ran.load() == 5000; })) << ran.load();
  for (auto& s : seen) ASSERT_EQ(s.load(), 1);
}

TEST(ThreadPoolTest, CountsBusyTime) {
  const absl::Time start = absl::Now();
  ThreadPool pool("t", 2);
  for (int i = 0; i < 4; ++i) {
    pool.Schedule([&] { absl::SleepFor(absl::Milliseconds(20)); });
  }
  // Four tasks of at least 20 ms each, counted as each ends.
  EXPECT_TRUE(testing::PollUntil([&] { return pool.busy_ns() >= 80'000'000u; }))
      << pool.busy_ns();
  // Never more than its 2 threads' wall time since the pool began.
  const int64_t wall = absl::ToInt64Nanoseconds(absl::Now() - start);
  EXPECT_LE(pool.busy_ns(), static_cast<uint64_t>(2 * wall));
}

// A pool saturated by long tasks reads busy while they run, not only when
// they end (autotune must not shrink a pool that is working flat out).
TEST(ThreadPoolTest, CountsBusyTimeOfRunningTasks) {
  ThreadPool pool("t", 2);
  absl::Notification release;
  std::atomic<int> started{0};
  for (int i = 0; i < 2; ++i) {
    pool.Schedule([&] {
      started.fetch_add(1);
      release.WaitForNotification();
    });
  }
  ASSERT_TRUE(testing::PollUntil([&] { return started.load() == 2; }));
  const uint64_t before = pool.busy_ns();
  absl::SleepFor(absl::Milliseconds(100));
  // Two workers busy for at least the 100 ms slept, none of it finished.
  EXPECT_GE(pool.busy_ns() - before, 200'000'000u);
  release.Notify();
}

// A user whose tasks block (reads of a store that does not answer) holds
// at most the cap's workers: another user's task runs on the rest. It
// could not without the cap (A's tasks would hold all 8), so B's task
// finishing is the proof; A's count is its own, not timed.
TEST(ThreadPoolTest, AUserCapLeavesThreadsToOthers) {
  constexpr int kThreads = 8, kCap = kThreads / 2, kBlocked = 100;
  ThreadPool pool("t", kThreads);
  pool.SetUserCap(kCap);
  absl::Mutex mu;
  int holding = 0, most = 0, done = 0;
  absl::Notification release, b_done;
  for (int i = 0; i < kBlocked; ++i) {
    pool.Schedule(
        [&] {
          {
            absl::MutexLock lock(&mu);
            most = std::max(most, ++holding);
          }
          release.WaitForNotification();
          absl::MutexLock lock(&mu);
          --holding;
          ++done;
        },
        /*group=*/1, /*weight=*/1, /*user=*/1000);
  }
  {
    absl::MutexLock lock(&mu);  // A holds all it may before B asks.
    mu.Await(absl::Condition(+[](int* n) { return *n == kCap; }, &holding));
  }
  pool.Schedule([&] { b_done.Notify(); }, /*group=*/2, /*weight=*/1, /*user=*/1001);
  b_done.WaitForNotification();
  EXPECT_EQ(pool.queued(), size_t{kBlocked - kCap});  // The rest of A's wait.
  release.Notify();
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(+[](int* n) { return *n == kBlocked; }, &done));
  EXPECT_EQ(most, kCap);
}

// Tasks of no user (the daemon's own) are not capped, nor anyone's once
// the cap is lifted.
TEST(ThreadPoolTest, NoCapBindsTheDaemonsOwnTasks) {
  constexpr int kThreads = 4;
  ThreadPool pool("t", kThreads);
  pool.SetUserCap(1);
  absl::Mutex mu;
  int holding = 0;
  absl::Notification release;
  for (int i = 0; i < kThreads; ++i) {
    pool.Schedule([&] {
      {
        absl::MutexLock lock(&mu);
        ++holding;
      }
      release.WaitForNotification();
    });
  }
  {
    absl::MutexLock lock(&mu);  // All four run at once.
    mu.Await(absl::Condition(+[](int* n) { return *n == kThreads; }, &holding));
  }
  release.Notify();
}

// A closing session takes its queued tasks back while its user is at its
// cap: they come out in order, the pool never runs them, and the rest of
// the user's work (and another user's) runs as before.
TEST(ThreadPoolTest, TakeQueuedRemovesOneGroupsWaitingTasks) {
  ThreadPool pool("t", 2);
  pool.SetUserCap(1);
  absl::Mutex mu;
  std::vector<int> ran;
  absl::Notification started, release;
  pool.Schedule([&] { started.Notify(); release.WaitForNotification(); },
                /*group=*/1, /*weight=*/1, /*user=*/1000);
  started.WaitForNotification();  // User 1000 is at its cap.
  auto record = [&](int v) {
    return [&, v] {
      absl::MutexLock lock(&mu);
      ran.push_back(v);
    };
  };
  for (int i = 0; i < 3; ++i) pool.Schedule(record(20 + i), /*group=*/2, 1, /*user=*/1000);
  pool.Schedule(record(30), /*group=*/3, 1, /*user=*/1000);
  for (int i = 0; i < 2; ++i) pool.Schedule(record(40 + i), /*group=*/4, 1, /*user=*/1001);
  {
    absl::MutexLock lock(&mu);  // The other user runs past the capped one.
    mu.Await(absl::Condition(+[](std::vector<int>* r) { return r->size() == 2; }, &ran));
  }
  std::deque<std::function<void()>> taken = pool.TakeQueued(2);
  EXPECT_EQ(taken.size(), 3u);
  EXPECT_EQ(pool.queued(), 1u);  // Group 3's task.
  EXPECT_TRUE(pool.TakeQueued(2).empty());
  EXPECT_TRUE(pool.TakeQueued(99).empty());
  for (auto& t : taken) t();  // In their order, here.
  // A group that was its user's only one: the user leaves the turns.
  pool.Schedule(record(50), /*group=*/5, 1, /*user=*/1002);
  release.Notify();
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(+[](std::vector<int>* r) { return r->size() == 7; }, &ran));
    EXPECT_EQ(std::vector<int>(ran.begin() + 2, ran.begin() + 5),
              (std::vector<int>{20, 21, 22}));
  }
  pool.Schedule(record(60), /*group=*/2, 1, /*user=*/1000);  // The group may come back.
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(+[](std::vector<int>* r) { return r->size() == 8; }, &ran));
  std::vector<int> sorted = ran;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int>{20, 21, 22, 30, 40, 41, 50, 60}));
}

// The idle hook runs on the worker that ran out of work, after its task,
// each time it runs out.
TEST(ThreadPoolTest, AWorkerOutOfWorkRunsTheIdleHook) {
  absl::Mutex mu;
  std::vector<std::thread::id> idle_on;
  std::thread::id ran_on;
  ThreadPool pool("idle", 1, nullptr, [&] {
    absl::MutexLock lock(&mu);
    idle_on.push_back(std::this_thread::get_id());
  });
  auto idles = [&](size_t n) {
    absl::MutexLock lock(&mu);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return idle_on.size() >= n; };
    mu.Await(absl::Condition(&reached));
    return idle_on.size();
  };
  idles(1);  // Idle from the start.
  for (int round = 0; round < 3; ++round) {
    absl::Notification done;
    size_t before;
    {
      absl::MutexLock lock(&mu);
      before = idle_on.size();
    }
    pool.Schedule([&] {
      ran_on = std::this_thread::get_id();
      done.Notify();
    });
    done.WaitForNotification();
    EXPECT_GE(idles(before + 1), before + 1);
  }
  absl::MutexLock lock(&mu);
  EXPECT_EQ(idle_on.back(), ran_on);
}

TEST(ParallelForTest, RunsEveryItemOnceOnTheCallerAndHelpers) {
  ThreadPool pool("t", 3);
  std::vector<std::atomic<int>> runs(1000);
  ParallelFor(&pool, 3, runs.size(), [&](size_t i) { runs[i].fetch_add(1); });
  for (const auto& r : runs) EXPECT_EQ(r.load(), 1);
  // No pool, no items, no helpers.
  std::atomic<int> total{0};
  ParallelFor(nullptr, 4, 7, [&](size_t) { total.fetch_add(1); });
  ParallelFor(&pool, 0, 5, [&](size_t) { total.fetch_add(1); });
  ParallelFor(&pool, 3, 0, [&](size_t) { total.fetch_add(1); });
  EXPECT_EQ(total.load(), 12);
}

// A task of a one-worker pool that fans out on that same pool finishes:
// its helper cannot start while it runs, so the caller takes every item.
TEST(ParallelForTest, ATaskOfABusyPoolFinishesItsItemsAlone) {
  ThreadPool pool("t", 1);
  absl::Notification done;
  std::atomic<int> total{0};
  std::thread::id caller;
  std::atomic<int> elsewhere{0};
  pool.Schedule([&] {
    caller = std::this_thread::get_id();
    ParallelFor(&pool, 4, 50, [&](size_t) {
      total.fetch_add(1);
      if (std::this_thread::get_id() != caller) elsewhere.fetch_add(1);
    });
    done.Notify();
  });
  done.WaitForNotification();
  EXPECT_EQ(total.load(), 50);
  EXPECT_EQ(elsewhere.load(), 0);
}

}  // namespace
}  // namespace stoker
