#include "server/serve/batch_order.h"

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/dataset/dataset_growth.h"

namespace stoker {
namespace {

PlanSpec Spec(uint32_t batch, uint32_t rank, uint32_t world) {
  PlanSpec s;
  s.batch_size = batch;
  s.shuffle = true;
  s.seed = 11;
  s.rank = rank;
  s.world_size = world;
  return s;
}

// A dataset of `windows`, whole or streamed.
std::shared_ptr<Dataset> Windows(const std::vector<uint64_t>& windows, bool streamed) {
  auto ds = std::make_shared<Dataset>();
  uint64_t n = 0;
  for (uint64_t w : windows) n += w;
  if (streamed) {
    ds->growth = std::make_shared<DatasetGrowth>(n, windows.size());
    return ds;
  }
  for (uint64_t i = 0; i < n; ++i) ds->samples.push_back({absl::StrCat(i), 0, {}});
  ds->first_epoch_windows = windows;
  return ds;
}

// Publishes the windows one by one, each once `next` allows it.
void Grow(DatasetGrowth* g, const std::vector<uint64_t>& windows, std::atomic<size_t>* allowed,
          absl::Status end) {
  uint64_t i = 0;
  for (size_t w = 0; w < windows.size(); ++w) {
    while (allowed->load() <= w) std::this_thread::yield();
    for (uint64_t k = 0; k < windows[w]; ++k, ++i) ASSERT_TRUE(g->Append({absl::StrCat(i), 0, {}}).ok());
    g->PublishWindow();
  }
  g->Finish(std::move(end));
}

std::vector<BatchOrder::Batch> Take(BatchOrder& o, size_t n) {
  std::vector<BatchOrder::Batch> out(n);
  for (auto& b : out) {
    absl::Status s = o.Next([] { return false; }, &b);
    EXPECT_TRUE(s.ok()) << s;
  }
  return out;
}

// The first `n` batches of `spec`'s order over `ds` (of `windows`) from
// `start`; a streamed `ds` publishes every window as the order waits.
std::vector<BatchOrder::Batch> TakeOpened(const PlanSpec& spec, const std::shared_ptr<Dataset>& ds,
                                          const std::vector<uint64_t>& windows,
                                          BatchOrder::Start start, size_t n) {
  auto o = BatchOrder::Create(spec, ds, start);
  EXPECT_TRUE(o.ok()) << o.status();
  if (!o.ok()) return {};
  std::atomic<size_t> allowed{windows.size()};
  std::thread grow;
  if (ds->growth != nullptr) {
    grow = std::thread(Grow, ds->growth.get(), windows, &allowed, absl::OkStatus());
  }
  std::vector<BatchOrder::Batch> got = Take(**o, n);
  if (grow.joinable()) grow.join();
  return got;
}

void ExpectSameBatches(const std::vector<BatchOrder::Batch>& got,
                       const std::vector<BatchOrder::Batch>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].epoch, want[i].epoch) << i;
    EXPECT_EQ(got[i].index, want[i].index) << i;
    EXPECT_EQ(got[i].samples, want[i].samples) << i;
  }
}

TEST(BatchOrderTest, AStreamedOpeningGivesThePlansBatches) {
  const std::vector<uint64_t> windows = {5, 10, 20, 40, 33};
  for (uint32_t world : {1u, 3u}) {
    for (bool drop_last : {false, true}) {
      PlanSpec spec = Spec(4, world - 1, world);
      spec.drop_last = drop_last;
      auto whole = BatchOrder::Create(spec, Windows(windows, false), {0, 0, 0});
      ASSERT_TRUE(whole.ok()) << whole.status();
      const uint64_t per_epoch = (*whole)->batches_per_epoch();
      const std::vector<BatchOrder::Batch> want = Take(**whole, per_epoch * 2 + 1);

      auto ds = Windows(windows, true);
      auto streamed = BatchOrder::Create(spec, ds, {0, 0, 0});
      ASSERT_TRUE(streamed.ok()) << streamed.status();
      EXPECT_EQ((*streamed)->batches_per_epoch(), 0u);
      std::atomic<size_t> allowed{1};
      std::thread grow(Grow, ds->growth.get(), windows, &allowed, absl::OkStatus());
      // Only what the published windows hold is served before the end:
      // the first window's 5 samples make a batch of 4 for one rank.
      std::vector<BatchOrder::Batch> got;
      if (world == 1) {
        got = Take(**streamed, 1);
        EXPECT_EQ((*streamed)->batches_per_epoch(), 0u);
      }
      allowed.store(windows.size());
      for (const auto& b : Take(**streamed, want.size() - got.size())) got.push_back(b);
      grow.join();
      EXPECT_EQ((*streamed)->batches_per_epoch(), per_epoch);
      SCOPED_TRACE(testing::Message() << "world " << world << " drop_last " << drop_last);
      ExpectSameBatches(got, want);
    }
  }
}

TEST(BatchOrderTest, AStreamedResumeStartsAtItsBatchEvenPastTheEnd) {
  const std::vector<uint64_t> windows = {5, 10, 20};  // 35 samples: 9 batches of 4.
  for (uint64_t start : {3u, 9u, 11u}) {
    auto whole = BatchOrder::Create(Spec(4, 0, 1), Windows(windows, false), {0, 0, start});
    ASSERT_TRUE(whole.ok());
    SCOPED_TRACE(start);
    ExpectSameBatches(
        TakeOpened(Spec(4, 0, 1), Windows(windows, true), windows, {0, 0, start}, 3),
        Take(**whole, 3));
  }
}

TEST(BatchOrderTest, AResumeFromAPositionReadsOnInTheSameGlobalOrder) {
  // 35 samples, read by 2 ranks from position 10 (what another world size
  // consumed): rank r takes 10 + r, 12 + r, ... of the same global order,
  // whole or streamed, and a start past that epoch's batches goes on into
  // the next epoch from its beginning.
  const std::vector<uint64_t> windows = {5, 10, 20};
  auto plain = BatchOrder::Create(Spec(4, 0, 1), Windows(windows, false), {0, 0, 0});
  ASSERT_TRUE(plain.ok());
  std::vector<uint64_t> global;
  for (const auto& b : Take(**plain, 9)) global.insert(global.end(), b.samples.begin(), b.samples.end());
  ASSERT_EQ(global.size(), 35u);
  for (bool streamed : {false, true}) {
    for (uint32_t rank : {0u, 1u}) {
      // 25 samples left: 13 a rank (padded), batches of 4, 4, 4, 1.
      const std::vector<BatchOrder::Batch> got =
          TakeOpened(Spec(4, rank, 2), Windows(windows, streamed), windows, {0, 10, 1}, 4);
      ASSERT_EQ(got.size(), 4u);
      EXPECT_EQ(got[0].index, 1u);
      for (int k = 0; k < 4; ++k) EXPECT_EQ(got[0].samples[k], global[10 + (4 + k) * 2 + rank]);
      EXPECT_EQ(got[2].index, 3u);
      ASSERT_EQ(got[2].samples.size(), 1u);
      // Position 10 + 12 x 2 + rank: 34, then the order's head again.
      EXPECT_EQ(got[2].samples[0], global[(34 + rank) % 35]) << rank;
      EXPECT_EQ(got[3].epoch, 1u);
      EXPECT_EQ(got[3].index, 0u);
    }
  }
  // A position at or past the samples (a state saved at the end of a
  // resumed epoch): that epoch is over, whole or streamed.
  for (uint64_t from : {uint64_t{35}, uint64_t{36}, uint64_t{1} << 63}) {
    for (bool streamed : {false, true}) {
      const std::vector<BatchOrder::Batch> got =
          TakeOpened(Spec(4, 0, 1), Windows(windows, streamed), windows, {0, from, 0}, 1);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(got[0].epoch, 1u) << from;
      EXPECT_EQ(got[0].index, 0u) << from;
    }
  }
}

TEST(BatchOrderTest, AStreamedResumeFromAPositionIsServedBeforeTheOpeningEnds) {
  // Position 2, batches of 4: the first batch lies in the first two windows
  // (15 samples), served while the third is not published.
  const std::vector<uint64_t> windows = {5, 10, 20};
  auto plain = BatchOrder::Create(Spec(4, 0, 1), Windows(windows, false), {0, 0, 0});
  ASSERT_TRUE(plain.ok());
  const std::vector<BatchOrder::Batch> whole = Take(**plain, 2);
  auto ds = Windows(windows, true);
  auto o = BatchOrder::Create(Spec(4, 0, 1), ds, {0, 2, 0});
  ASSERT_TRUE(o.ok());
  std::atomic<size_t> allowed{2};
  std::thread grow(Grow, ds->growth.get(), windows, &allowed, absl::OkStatus());
  const std::vector<BatchOrder::Batch> got = Take(**o, 1);
  EXPECT_EQ((*o)->batches_per_epoch(), 0u);  // The opening has not ended.
  allowed.store(windows.size());
  grow.join();
  EXPECT_EQ(got[0].samples, (std::vector<uint64_t>{whole[0].samples[2], whole[0].samples[3],
                                                    whole[1].samples[0], whole[1].samples[1]}));
}

TEST(BatchOrderTest, AStreamedOpeningOfOneWindowReadsItsFirstEpochAsTheWholeDoes) {
  // An opening that published one window (an ImageFolder in a bucket whose
  // later listing found no more images) and the same dataset opened whole
  // (its kept listing) read epoch 0 alike: window 0's order is the
  // canonical one.
  const std::vector<uint64_t> windows = {40};
  auto whole = BatchOrder::Create(Spec(4, 0, 1), Windows(windows, false), {0, 0, 0});
  ASSERT_TRUE(whole.ok());
  ExpectSameBatches(TakeOpened(Spec(4, 0, 1), Windows(windows, true), windows, {0, 0, 0}, 10),
                    Take(**whole, 10));
}

TEST(BatchOrderTest, ACanonicalFirstEpochOfAListingsWindowsWaitsForTheWholeListing) {
  // Windows that are only the listing's: canonical_first_epoch (a world's
  // default) waits for its end and reads the canonical first epoch (that
  // of one window), from any start; without it, the windows in turn.
  const std::vector<uint64_t> windows = {32, 64, 96};
  for (uint32_t world : {1u, 3u}) {
    for (bool canonical : {false, true}) {
      for (BatchOrder::Start start : {BatchOrder::Start{0, 0, 0}, BatchOrder::Start{0, 24, 2}}) {
        for (bool streamed : {false, true}) {
          SCOPED_TRACE(testing::Message() << "world " << world << " canonical " << canonical
                                          << " from " << start.from << " streamed " << streamed);
          PlanSpec spec = Spec(4, world - 1, world);
          spec.canonical_first_epoch = canonical;
          auto plain = BatchOrder::Create(spec, Windows(canonical ? std::vector<uint64_t>{192}
                                                                  : windows, false), start);
          ASSERT_TRUE(plain.ok());
          const std::vector<BatchOrder::Batch> want =
              Take(**plain, (*plain)->batches_per_epoch() + 2);

          auto ds = Windows(windows, streamed);
          ds->windows_for_listing_only = true;
          auto o = BatchOrder::Create(spec, ds, start);
          ASSERT_TRUE(o.ok()) << o.status();
          std::atomic<size_t> allowed{1};
          std::thread grow;
          bool early = false;  // A batch taken before the listing's end.
          if (streamed) {
            grow = std::thread(Grow, ds->growth.get(), windows, &allowed, absl::OkStatus());
            while (ds->growth->Now().windows.size() < 1) std::this_thread::yield();
            // Window 0 is published: windows in turn serve their first batch
            // from it, the canonical first epoch waits (the second look at
            // `stop` follows taking that window).
            int looks = 0;
            BatchOrder::Batch b;
            const absl::Status s = (*o)->Next([&] { return ++looks > 1; }, &b);
            early = s.ok();
            EXPECT_EQ(early, !canonical && start.from == 0) << s;
            if (early) {
              EXPECT_EQ(b.samples, want[0].samples);
            } else {
              EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
            }
            if (canonical) {
              EXPECT_EQ((*o)->batches_per_epoch(), 0u);
            }
            allowed.store(windows.size());
          }
          std::vector<BatchOrder::Batch> got = Take(**o, want.size() - early);
          if (streamed) grow.join();
          if (early) got.insert(got.begin(), want[0]);
          ExpectSameBatches(got, want);
          EXPECT_EQ((*o)->ReplacementRange(0, 40),
                    (canonical ? std::pair<uint64_t, uint64_t>{0, 192}
                               : std::pair<uint64_t, uint64_t>{32, 64}));
        }
      }
    }
  }
}

TEST(BatchOrderTest, TheOpeningsErrorEndsItAndStopCancelsAWait) {
  const std::vector<uint64_t> windows = {4, 4, 8};
  auto ds = Windows(windows, true);
  auto o = BatchOrder::Create(Spec(4, 0, 1), ds, {0, 0, 0});
  ASSERT_TRUE(o.ok());
  BatchOrder::Batch b;
  EXPECT_EQ((*o)->Next([] { return true; }, &b).code(), absl::StatusCode::kCancelled);
  std::atomic<size_t> allowed{2};
  std::thread grow(Grow, ds->growth.get(), std::vector<uint64_t>{4, 4}, &allowed,
                   absl::DataLossError("shard 2 changed"));
  Take(**o, 2);
  EXPECT_EQ((*o)->Next([] { return false; }, &b).code(), absl::StatusCode::kDataLoss);
  grow.join();
  // A streamed dataset is served from its first epoch only.
  EXPECT_EQ(BatchOrder::Create(Spec(4, 0, 1), ds, {1, 0, 0}).status().code(),
            absl::StatusCode::kInternal);
}

TEST(BatchOrderTest, StandInsComeFromTheFailedSamplesWindowInTheFirstEpoch) {
  auto o = BatchOrder::Create(Spec(4, 0, 1), Windows({5, 10, 20}, false), {0, 0, 0});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ((*o)->ReplacementRange(0, 7), (std::pair<uint64_t, uint64_t>{5, 10}));
  EXPECT_EQ((*o)->ReplacementRange(1, 7), (std::pair<uint64_t, uint64_t>{0, 35}));
  auto one = BatchOrder::Create(Spec(4, 0, 1), Windows({35}, false), {0, 0, 0});
  EXPECT_EQ((*one)->ReplacementRange(0, 7), (std::pair<uint64_t, uint64_t>{0, 35}));
}

}  // namespace
}  // namespace stoker
