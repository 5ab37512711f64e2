// CacheWarmer over fakes: every file of every sample read once, counted;
// concurrency bounded; Stop ends a job early and refuses new ones.
#include "server/cache/cache_warmer.h"

#include <atomic>
#include <set>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

std::shared_ptr<Dataset> Data(int samples) {
  auto ds = std::make_shared<Dataset>();
  ds->description = "fake";
  for (int i = 0; i < samples; ++i) {
    ds->samples.push_back(Sample{"s" + std::to_string(i), 0, {"m" + std::to_string(i)}});
  }
  return ds;
}

// Runs every task on a thread of its own (a pool without a bound).
struct Threads {
  absl::Mutex mu;
  std::vector<std::thread> running;
  CacheWarmer::Schedule schedule() {
    return [this](std::function<void()> task) {
      absl::MutexLock lock(&mu);
      running.emplace_back(std::move(task));
    };
  }
  ~Threads() {
    for (std::thread& t : running) t.join();
  }
};

TEST(CacheWarmerTest, ReadsEveryFileOnceAndCounts) {
  Threads pool;
  absl::Mutex mu;
  std::multiset<std::string> read;
  std::atomic<int> in_flight{0}, most{0};
  CacheWarmer w(pool.schedule(), [&](const Dataset&, const std::string& file, bool* source) {
    const int now = ++in_flight;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    {
      absl::MutexLock lock(&mu);
      read.insert(file);
    }
    *source = file[1] != '0';  // "s0"/"m0" come from a cache.
    --in_flight;
    return file == "m3" ? absl::DataLossError("bad") : absl::OkStatus();
  });
  auto id = w.Start(Data(20), 3);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, 1u);
  w.Wait();
  EXPECT_EQ(read.size(), 40u);
  EXPECT_EQ(std::set<std::string>(read.begin(), read.end()).size(), 40u);
  EXPECT_LE(most.load(), 3);
  const std::vector<v1::WarmJob> jobs = w.Jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_TRUE(jobs[0].finished());
  EXPECT_EQ(jobs[0].total(), 20u);
  EXPECT_EQ(jobs[0].done(), 20u);
  EXPECT_EQ(jobs[0].failed(), 1u);         // Sample 3's mask.
  EXPECT_EQ(jobs[0].source_reads(), 19u);  // All but sample 0.
  EXPECT_EQ(jobs[0].dataset(), "fake");
  EXPECT_EQ(*w.Start(Data(1), 1), 2u);
}

TEST(CacheWarmerTest, StopEndsAJobEarlyAndRefusesNewOnes) {
  Threads pool;
  absl::Notification first_read, release;
  std::atomic<int> reads{0};
  CacheWarmer w(pool.schedule(), [&](const Dataset&, const std::string&, bool*) {
    if (reads++ == 0) {
      first_read.Notify();
      release.WaitForNotification();
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(w.Start(Data(1000), 1).ok());
  first_read.WaitForNotification();  // One read in flight, the job waiting on it.
  std::thread stopper([&] { w.Stop(); });
  // Stop refuses new jobs at once, before the running one has ended.
  absl::StatusOr<uint64_t> refused;
  do {
    refused = w.Start(Data(1), 1);
  } while (refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  release.Notify();
  stopper.join();
  const std::vector<v1::WarmJob> jobs = w.Jobs();
  EXPECT_TRUE(jobs[0].finished());
  EXPECT_LT(jobs[0].done(), 1000u);
}

}  // namespace
}  // namespace stoker
