#include "server/dataset/dataset_growth.h"

#include <atomic>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

Sample Named(uint64_t i) { return Sample{absl::StrCat("s", i), static_cast<int32_t>(i % 7), {}}; }

TEST(DatasetGrowthTest, ReadersSeeWholeWindowsThatNeverMove) {
  // Past several segments of the directory.
  const uint64_t n = (uint64_t{1} << 16) + 10;
  DatasetGrowth g(n, 2);
  Dataset ds;
  ds.growth = std::shared_ptr<DatasetGrowth>(&g, [](DatasetGrowth*) {});  // Not owned.
  for (uint64_t i = 0; i < 5; ++i) ASSERT_TRUE(g.Append(Named(i)).ok());
  EXPECT_EQ(ds.sample_count(), 0u);  // Appended, not yet published.
  g.PublishWindow();
  EXPECT_EQ(ds.sample_count(), 5u);
  const Sample* first = &ds.sample(0);
  for (uint64_t i = 5; i < n; ++i) ASSERT_TRUE(g.Append(Named(i)).ok());
  EXPECT_EQ(g.Append(Named(n)).code(), absl::StatusCode::kInternal);  // Past the capacity.
  EXPECT_EQ(&ds.sample(0), first);
  g.PublishWindow();
  g.Finish(absl::OkStatus(), 7);
  EXPECT_EQ(ds.sample_count(), n);
  EXPECT_EQ(ds.sample(n - 1).path, absl::StrCat("s", n - 1));
  const DatasetGrowth::View v = g.Now();
  EXPECT_EQ(v.windows, (std::vector<uint64_t>{5, n - 5}));
  EXPECT_TRUE(v.done);
  EXPECT_TRUE(v.status.ok());
  EXPECT_EQ(v.num_classes, 7u);
  EXPECT_EQ(g.WindowAround(4), (std::pair<uint64_t, uint64_t>{0, 5}));
  EXPECT_EQ(g.WindowAround(5), (std::pair<uint64_t, uint64_t>{5, n - 5}));
  g.Finish(absl::InternalError("late"));  // Ignored: it ended.
  EXPECT_TRUE(g.Now().status.ok());
}

TEST(DatasetGrowthTest, AWaitEndsAtTheNextWindowOrTheEnd) {
  auto g = std::make_shared<DatasetGrowth>(100, 3);
  std::thread writer([g] {
    for (int w = 0; w < 2; ++w) {
      ASSERT_TRUE(g->Append(Named(w)).ok());
      g->PublishWindow();
    }
    g->Finish(absl::DataLossError("shard 2 changed"));
  });
  size_t known = 0;
  DatasetGrowth::View v;
  while (!(v = g->Wait(known, absl::InfiniteDuration())).done) known = v.windows.size();
  writer.join();
  EXPECT_EQ(v.windows.size(), 2u);
  EXPECT_EQ(v.status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(g->published_samples(), 2u);
}

TEST(DatasetGrowthTest, DroppingTheDatasetsHandleCancelsTheWriter) {
  auto g = std::make_shared<DatasetGrowth>(10, 2);
  std::atomic<bool> saw_cancel{false};
  // The writer holds the growth itself; the handle's drop cancels it and,
  // given the writer's thread, joins it.
  std::shared_ptr<DatasetGrowth> handle = CancelOnDrop(g, std::thread([g, &saw_cancel] {
    while (!g->cancelled()->load()) std::this_thread::yield();
    saw_cancel.store(true);
  }));
  EXPECT_EQ(handle.get(), g.get());
  handle.reset();
  EXPECT_TRUE(saw_cancel.load());
  // Without a thread: cancelled, not waited for.
  auto other = std::make_shared<DatasetGrowth>(10, 2);
  CancelOnDrop(other).reset();
  EXPECT_TRUE(other->cancelled()->load());
}

}  // namespace
}  // namespace stoker
