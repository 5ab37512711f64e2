#include "server/serve/exchange_split.h"

#include <algorithm>
#include <memory>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "util/rng.h"

namespace stoker {
namespace {

// Sizes as photographs have them: a spread around a typical size, some
// much larger.
std::vector<uint64_t> PhotoSizes(uint64_t n, uint64_t seed) {
  std::vector<uint64_t> sizes(n);
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t state = seed ^ (i * 0x9e3779b97f4a7c15ULL);
    const uint64_t h = SplitMix64(state);
    sizes[i] = 20'000 + h % 40'000 + (h % 10 == 0 ? 200'000 : 0);
  }
  return sizes;
}

// Every position of a partition of `size` is exported or kept, once.
void ExpectAPartition(const ExchangeSplit& s, uint64_t size, uint64_t exported) {
  ASSERT_EQ(s.exported.size(), exported);
  std::vector<uint64_t> all;
  for (uint64_t j = 0; j < exported; ++j) all.push_back(s.Exported(j));
  for (uint64_t i = 0; i < size - exported; ++i) all.push_back(s.Kept(i));
  std::sort(all.begin(), all.end());
  for (uint64_t j = 0; j < size; ++j) ASSERT_EQ(all[j], j);
}

TEST(ExchangeSplitTest, SamplesOfOneSizeSplitAsTheDrawsHead) {
  const ExchangeSplit s = SplitByBytes(80, 4, 80 * 1000, 80, [](uint64_t) { return 1000; });
  EXPECT_EQ(s.exported, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_TRUE(s.passed.empty());
  EXPECT_EQ(s.walked, 4u);
  EXPECT_EQ(s.Kept(0), 4u);
  EXPECT_FALSE(s.over_budget);
  ExpectAPartition(s, 80, 4);
}

TEST(ExchangeSplitTest, TheExportedBytesStayWithinTheirCountTimesTheMean) {
  const std::vector<uint64_t> sizes = PhotoSizes(96'000, 5);
  const uint64_t total = std::accumulate(sizes.begin(), sizes.end(), uint64_t{0});
  uint64_t over_by_count = 0;
  for (uint64_t p = 0; p < 120; ++p) {
    const auto bytes_at = [&](uint64_t j) { return sizes[p * 800 + j]; };
    for (uint64_t exported : {1u, 4u, 40u, 400u}) {
      const ExchangeSplit s = SplitByBytes(800, exported, total, sizes.size(), bytes_at);
      ExpectAPartition(s, 800, exported);
      EXPECT_FALSE(s.over_budget);
      uint64_t bytes = 0, head = 0;
      for (uint64_t j = 0; j < exported; ++j) {
        bytes += bytes_at(s.Exported(j));
        head += bytes_at(j);
      }
      EXPECT_LE(bytes * sizes.size(), exported * total) << p << " " << exported;
      // The draw's head (the exchange by count) goes past it, often.
      over_by_count += head * sizes.size() > exported * total ? 1 : 0;
    }
  }
  EXPECT_GT(over_by_count, 100u);
}

TEST(ExchangeSplitTest, SizesPastATebibyteWeighAsOne) {
  // A listing's size of 2^63 weighs as 2^40: nothing overflows, and the
  // split is as for that size.
  const uint64_t huge = uint64_t{1} << 63, tib = kMostWeighedBytes;
  const std::vector<uint64_t> sizes = {huge, 1, huge, 1};
  const auto at = [&](uint64_t j) { return sizes[j]; };
  const auto capped = [&](uint64_t j) { return std::min(sizes[j], tib); };
  const unsigned __int128 total = 2 * static_cast<unsigned __int128>(tib) + 2;
  const ExchangeSplit s = SplitByBytes(4, 2, total, 4, at);
  EXPECT_EQ(s.exported, SplitByBytes(4, 2, total, 4, capped).exported);
  // 2^40 alone is over the mean; 1, then (1 + 2^40) x 4 <= 2 x total.
  EXPECT_EQ(s.exported, (std::vector<uint32_t>{1, 2}));
  ExchangeSplits splits([&](uint64_t i) { return sizes[i % 4]; }, 4'000);
  EXPECT_TRUE(splits.ByBytes());
}

TEST(ExchangeSplitTest, APartitionOfHeavySamplesMakesUpItsCountWithItsLightest) {
  // Mean 1,000; this partition's samples all above it.
  const std::vector<uint64_t> heavy = {5000, 1200, 3000, 1100, 9000, 1500};
  const ExchangeSplit s =
      SplitByBytes(6, 2, 1000 * 100, 100, [&](uint64_t j) { return heavy[j]; });
  EXPECT_TRUE(s.over_budget);
  EXPECT_EQ(s.exported, (std::vector<uint32_t>{3, 1}));
  EXPECT_EQ(s.walked, 6u);
  ExpectAPartition(s, 6, 2);
  EXPECT_EQ(s.Kept(0), 0u);
  EXPECT_EQ(s.Kept(3), 5u);
}

TEST(ExchangeSplitTest, SplitsNeedEverySizeAndKeepTheLatestTwoEpochs) {
  const std::vector<uint64_t> sizes = PhotoSizes(1600, 9);
  const auto sample_at = [](uint64_t j) { return j; };
  ExchangeSplits empty([](uint64_t) { return uint64_t{0}; }, 1600);
  EXPECT_FALSE(empty.ByBytes());
  ExchangeSplits none(nullptr, 1600);
  EXPECT_FALSE(none.ByBytes());

  ExchangeSplits splits([&](uint64_t i) { return sizes[i]; }, 1600);
  ASSERT_TRUE(splits.ByBytes());
  const auto e0 = splits.Get(0, 3, 800, 40, sample_at);
  EXPECT_EQ(splits.Get(0, 3, 800, 40, sample_at), e0);  // Kept.
  const ExchangeSplit direct = SplitByBytes(
      800, 40, std::accumulate(sizes.begin(), sizes.end(), uint64_t{0}), 1600,
      [&](uint64_t j) { return sizes[j]; });
  EXPECT_EQ(e0->exported, direct.exported);
  EXPECT_EQ(e0->passed, direct.passed);
  splits.Get(1, 3, 800, 40, sample_at);
  EXPECT_EQ(splits.Get(0, 3, 800, 40, sample_at), e0);
  splits.Get(2, 0, 800, 40, sample_at);  // Epoch 0's are let go.
  const auto again = splits.Get(0, 3, 800, 40, sample_at);
  EXPECT_NE(again, e0);
  EXPECT_EQ(again->exported, e0->exported);
}

TEST(ExchangeSplitTest, ASumInTheBackgroundIsWaitedForAndStopsWithItsSplits) {
  ExchangeSplits splits([](uint64_t i) { return i % 5; }, 100'000);
  splits.SumInBackground();
  splits.SumInBackground();  // Once.
  EXPECT_TRUE(splits.ByBytes());
  const auto s = splits.Get(1, 0, 50, 5, [](uint64_t j) { return j + 3; });
  // Sizes 3, 4, 0, 1, 2, 3, 4 with mean 2: neither 3 nor 4 alone; then 0,
  // 1, 2, 3 and 4 (10 bytes, within 5 x 2).
  EXPECT_EQ(s->exported, (std::vector<uint32_t>{2, 3, 4, 5, 6}));
  EXPECT_EQ(s->passed, (std::vector<uint32_t>{0, 1}));
  // A sum of a trillion samples, stopped by its splits' end.
  auto endless = std::make_unique<ExchangeSplits>(
      [](uint64_t) { return uint64_t{1}; }, uint64_t{1} << 39);
  endless->SumInBackground();
  endless.reset();
}

}  // namespace
}  // namespace stoker
