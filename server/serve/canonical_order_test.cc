#include "server/serve/canonical_order.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "util/rng.h"

namespace stoker {
namespace {

std::vector<uint64_t> Epoch(const CanonicalOrder& o, uint64_t epoch) {
  std::vector<uint64_t> out;
  for (uint64_t i = 0; i < o.size(); ++i) out.push_back(o.At(epoch, i));
  return out;
}

TEST(CanonicalOrderTest, EachEpochIsAPermutationOfItsOwn) {
  for (uint64_t n : {1u, 2u, 15u, 16u, 17u, 1000u, 1921u, 4096u}) {
    const CanonicalOrder o(n, 7, 120, 0);
    std::vector<uint64_t> e0 = Epoch(o, 0), e1 = Epoch(o, 1);
    if (n > 2) {
      EXPECT_NE(e0, e1) << n;
    }
    EXPECT_EQ(Epoch(o, 0), e0);  // A pure function of (seed, epoch).
    std::sort(e0.begin(), e0.end());
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(e0[i], i) << n;
    if (n > 2) {
      EXPECT_NE(Epoch(CanonicalOrder(n, 8, 120, 0), 1), e1) << n;
    }
  }
}

TEST(CanonicalOrderTest, PartitionsKeepSixteenSamplesEachAndDivideTheAskedCount) {
  EXPECT_EQ(CanonicalOrder::PartitionsFor(1920, 120), 120u);
  EXPECT_EQ(CanonicalOrder::PartitionsFor(1919, 120), 60u);
  EXPECT_EQ(CanonicalOrder::PartitionsFor(1000, 120), 60u);
  EXPECT_EQ(CanonicalOrder::PartitionsFor(100, 120), 6u);
  EXPECT_EQ(CanonicalOrder::PartitionsFor(31, 120), 1u);
  EXPECT_EQ(CanonicalOrder::PartitionsFor(1000, 7), 7u);
  EXPECT_EQ(CanonicalOrder::PartitionsFor(uint64_t{1} << 40, 65536), 65536u);
  // Round-robin: position i is partition i mod C, the tail's first ones.
  const CanonicalOrder o(1930, 1, 120, 0);
  ASSERT_EQ(o.partitions(), 120u);
  EXPECT_EQ(o.PartitionAt(0), 0u);
  EXPECT_EQ(o.PartitionAt(121), 1u);
  EXPECT_EQ(o.PartitionAt(1920), 0u);
  EXPECT_EQ(o.PartitionAt(1929), 9u);
}

// The samples rank r of w reads in `epoch` (positions r, r + w, ...).
std::set<uint64_t> RankShare(const CanonicalOrder& o, uint64_t epoch, uint32_t r, uint32_t w) {
  std::set<uint64_t> out;
  for (uint64_t i = r; i < o.size(); i += w) out.insert(o.At(epoch, i));
  return out;
}

TEST(CanonicalOrderTest, ARankOfAWorldSizeDividingCReadsTheSameSamplesEveryEpoch) {
  const CanonicalOrder o(2400, 3, 120, 0);  // 120 partitions of 20.
  for (uint32_t w : {2u, 3u, 8u, 12u, 120u}) {
    for (uint32_t r : {0u, w - 1}) {
      const std::set<uint64_t> e0 = RankShare(o, 0, r, w);
      EXPECT_EQ(e0.size(), 2400u / w);
      EXPECT_EQ(RankShare(o, 1, r, w), e0) << w << " " << r;
      EXPECT_EQ(RankShare(o, 9, r, w), e0) << w << " " << r;
    }
  }
  // 7 does not divide 120: a rank's share moves between epochs.
  EXPECT_NE(RankShare(o, 1, 0, 7), RankShare(o, 0, 0, 7));
}

TEST(CanonicalOrderTest, AnExchangeMovesThatFractionOfAShareEachLaterEpochAndKeepsEachSampleOnce) {
  const CanonicalOrder none(2400, 3, 120, 0);
  for (float q : {0.05f, 0.25f, 1.0f}) {
    const CanonicalOrder o(2400, 3, 120, q);  // 120 partitions of 20.
    EXPECT_EQ(o.exchanged(), static_cast<uint64_t>(std::lround(20 * q)));
    for (uint64_t epoch : {1u, 2u, 5u}) {
      std::vector<uint64_t> e = Epoch(o, epoch);
      std::sort(e.begin(), e.end());
      for (uint64_t i = 0; i < 2400; ++i) ASSERT_EQ(e[i], i) << q << " " << epoch;
    }
    // Rank 1 of 4 reads at most q of its share from the others' partitions
    // (a partition may be paired with one of its own), and not always the
    // same samples.
    const std::set<uint64_t> home = RankShare(none, 0, 1, 4);
    const std::set<uint64_t> e1 = RankShare(o, 1, 1, 4), e2 = RankShare(o, 2, 1, 4);
    for (const std::set<uint64_t>* share : {&e1, &e2}) {
      size_t away = 0;
      for (uint64_t i : *share) away += home.count(i) ? 0 : 1;
      EXPECT_LE(away, static_cast<size_t>(600 * q)) << q;
      EXPECT_GT(away, 0u) << q;
    }
    EXPECT_NE(e1, e2) << q;
    // HomeAt names the partition a sample was placed in (where epoch 0,
    // which exchanges nothing, reads it), wherever an epoch reads it.
    std::vector<uint32_t> placed(2400);
    for (uint64_t i = 0; i < 2400; ++i) placed[o.At(0, i)] = o.PartitionAt(i);
    size_t moved = 0;
    for (uint64_t i = 0; i < 2400; ++i) {
      ASSERT_EQ(o.HomeAt(1, i), placed[o.At(1, i)]) << q << " " << i;
      ASSERT_EQ(o.HomeAt(0, i), o.PartitionAt(i));
      moved += o.HomeAt(1, i) != o.PartitionAt(i) ? 1 : 0;
    }
    EXPECT_GT(moved, 0u) << q;
    EXPECT_LE(moved, 120 * o.exchanged()) << q;
    // Epoch 0 exchanges nothing: the world's first epoch reads each
    // partition's own samples.
    EXPECT_EQ(Epoch(o, 0), Epoch(none, 0)) << q;
    EXPECT_NE(Epoch(o, 1), Epoch(none, 1)) << q;
  }
  // Partitions of unequal size (the first N mod C hold one more), and an
  // exchange of all but what the larger ones keep: still each sample once.
  for (uint64_t n : {1921u, 2401u, 2519u}) {
    for (float q : {0.05f, 0.5f, 1.0f}) {
      const CanonicalOrder o(n, 4, 120, q);
      ASSERT_GT(o.exchanged(), 0u);
      std::vector<uint32_t> placed(n);
      for (uint64_t i = 0; i < n; ++i) placed[o.At(0, i)] = o.PartitionAt(i);
      for (uint64_t epoch : {1u, 3u}) {
        std::vector<uint64_t> e = Epoch(o, epoch);
        for (uint64_t i = 0; i < n; ++i) {
          uint32_t home = 0;
          ASSERT_EQ(o.At(epoch, i, &home), e[i]);
          ASSERT_EQ(home, placed[e[i]]) << n << " " << q << " " << epoch << " " << i;
        }
        std::sort(e.begin(), e.end());
        for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(e[i], i) << n << " " << q << " " << epoch;
      }
    }
  }
  // Too small to exchange: one partition. Rounded to nearest: 0.05 of 16.
  EXPECT_EQ(CanonicalOrder(20, 3, 120, 0.5f).exchanged(), 0u);
  EXPECT_EQ(CanonicalOrder(1920, 3, 120, 0.05f).exchanged(), 1u);
  EXPECT_EQ(CanonicalOrder(1920, 3, 120, 0.02f).exchanged(), 0u);
}

TEST(CanonicalOrderTest, GivenSizesANodeReadsWithinQOfItsShareInBytesFromOthers) {
  // 8 nodes of one rank, 24 partitions of 80: node r reads partitions r,
  // r + 8 and r + 16, and 4 samples of others' in place of each's.
  std::vector<uint64_t> sizes(1920);
  uint64_t total = 0;
  for (uint64_t i = 0; i < sizes.size(); ++i) {
    uint64_t state = i * 0x9e3779b97f4a7c15ULL;
    const uint64_t h = SplitMix64(state);
    sizes[i] = 20'000 + h % 40'000 + (h % 8 == 0 ? 150'000 : 0);
    total += sizes[i];
  }
  const auto bytes = [&](uint64_t i) { return sizes[i]; };
  const CanonicalOrder by_count(1920, 11, 24, 0.05f), by_bytes(1920, 11, 24, 0.05f, bytes);
  EXPECT_FALSE(by_count.ExchangeByBytes());
  ASSERT_TRUE(by_bytes.ExchangeByBytes());
  ASSERT_EQ(by_bytes.exchanged(), 4u);
  std::vector<uint32_t> placed(1920);
  for (uint64_t i = 0; i < 1920; ++i) placed[by_bytes.At(0, i)] = by_bytes.PartitionAt(i);
  EXPECT_EQ(Epoch(by_bytes, 0), Epoch(by_count, 0));
  size_t over_by_count = 0;
  for (uint64_t epoch = 1; epoch <= 12; ++epoch) {
    std::vector<uint64_t> e = Epoch(by_bytes, epoch);
    for (uint32_t node = 0; node < 8; ++node) {
      uint64_t away = 0, away_by_count = 0;
      for (uint64_t pos = node; pos < 1920; pos += 8) {
        uint32_t home = 0;
        const uint64_t s = by_bytes.At(epoch, pos, &home);
        ASSERT_EQ(home, placed[s]);
        away += home % 8 != node ? sizes[s] : 0;
        const uint64_t c = by_count.At(epoch, pos, &home);
        away_by_count += home % 8 != node ? sizes[c] : 0;
      }
      EXPECT_LE(away * 8, 0.05 * total) << epoch << " " << node;
      over_by_count += away_by_count * 8 > 0.05 * total ? 1 : 0;
    }
    std::sort(e.begin(), e.end());
    for (uint64_t i = 0; i < 1920; ++i) ASSERT_EQ(e[i], i) << epoch;
  }
  EXPECT_GT(over_by_count, 0u);  // By count, some node reads more.
  for (uint64_t epoch = 0; epoch <= 3; ++epoch) EXPECT_EQ(by_bytes.ExchangeOverBudget(epoch), 0u);
  // Most samples above the mean (1 in 200 tiny): a partition without a
  // tiny one makes up its count past the bound, and every epoch is still
  // a permutation, whatever the partitions' sizes (1,930 = 24 x 80 + 10).
  const auto mostly_heavy = [](uint64_t i) {
    uint64_t state = i;
    return SplitMix64(state) % 200 == 0 ? uint64_t{1} : uint64_t{100};
  };
  for (float q : {0.05f, 1.0f}) {
    const CanonicalOrder heavy(1930, 11, 24, q, mostly_heavy);
    ASSERT_TRUE(heavy.ExchangeByBytes());
    uint32_t over = 0;
    for (uint64_t epoch = 1; epoch <= 4; ++epoch) {
      over += heavy.ExchangeOverBudget(epoch);
      std::vector<uint64_t> e = Epoch(heavy, epoch);
      std::sort(e.begin(), e.end());
      for (uint64_t i = 0; i < 1930; ++i) ASSERT_EQ(e[i], i) << q << " " << epoch;
    }
    EXPECT_GT(over, 0u) << q;
  }
  // Sizes all 0 (none listed): by count.
  const CanonicalOrder unknown(1920, 11, 24, 0.05f, [](uint64_t) { return uint64_t{0}; });
  EXPECT_FALSE(unknown.ExchangeByBytes());
  EXPECT_EQ(Epoch(unknown, 3), Epoch(by_count, 3));
}

TEST(CanonicalOrderTest, ABatchMixesTheWholeDatasetNotItsIndexRanges) {
  // 10 "classes" of 1,200 consecutive indices (an ImageFolder): the first
  // 120 positions of every epoch hold each class at least once, and no
  // class more than a third of them.
  const CanonicalOrder o(12000, 5, 120, 0);
  for (uint64_t epoch : {0u, 1u, 2u}) {
    std::vector<int> per_class(10);
    for (uint64_t i = 0; i < 120; ++i) per_class[o.At(epoch, i) / 1200]++;
    for (int c : per_class) {
      EXPECT_GE(c, 1) << epoch;
      EXPECT_LE(c, 40) << epoch;
    }
  }
}

TEST(CanonicalOrderTest, ThePermutationIsOneToOneAtEveryDomainEdge) {
  // Sizes at and beside powers of 4, where the Feistel domain is tightest
  // or loosest: every position gives a distinct element below n.
  for (uint64_t n = 4; n <= (uint64_t{1} << 18); n *= 4) {
    for (uint64_t size : {n - 1, n, n + 1}) {
      const IndexPermutation p(size, 99);
      std::vector<bool> seen(size);
      for (uint64_t i = 0; i < size; ++i) {
        const uint64_t x = p.At(i);
        ASSERT_LT(x, size);
        ASSERT_FALSE(seen[x]) << size << " " << i;
        seen[x] = true;
      }
    }
  }
}

TEST(CanonicalOrderTest, AnOrderOfATrillionSamplesCostsNothingUpFront) {
  const uint64_t n = uint64_t{1} << 40;
  const CanonicalOrder o(n, 1, 120, 0);
  EXPECT_EQ(o.partitions(), 120u);
  std::set<uint64_t> seen;
  for (uint64_t i : {uint64_t{0}, uint64_t{1}, n / 2, n - 1}) {
    const uint64_t s = o.At(4, i);
    EXPECT_LT(s, n);
    seen.insert(s);
  }
  EXPECT_EQ(seen.size(), 4u);
}

}  // namespace
}  // namespace stoker
