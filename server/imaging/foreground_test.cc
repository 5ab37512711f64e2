#include "server/imaging/foreground.h"

#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace stoker {
namespace {

Foreground Build(const std::vector<uint8_t>& mask) {
  Foreground::Builder b(mask.size());
  // In two parts, as slabs are added.
  const uint64_t half = mask.size() / 2;
  b.Add(half, [&](uint64_t k) { return mask[k] != 0; });
  b.Add(mask.size() - half, [&](uint64_t k) { return mask[half + k] != 0; });
  return b.Finish();
}

TEST(ForegroundTest, ListsSetAndUnsetElementsInOrder) {
  Rng rng(3);
  for (double density : {0.0, 0.01, 0.3, 0.9, 1.0}) {
    std::vector<uint8_t> mask(1000);
    std::vector<uint64_t> set, unset;
    for (size_t k = 0; k < mask.size(); ++k) {
      mask[k] = rng.Uniform01() < density;
      (mask[k] ? set : unset).push_back(k);
    }
    const Foreground fg = Build(mask);
    ASSERT_EQ(fg.elements(), 1000u);
    ASSERT_EQ(fg.count(), set.size()) << density;
    for (size_t k = 0; k < set.size(); ++k) ASSERT_EQ(fg.Positive(k), set[k]);
    for (size_t k = 0; k < unset.size(); ++k) ASSERT_EQ(fg.Negative(k), unset[k]) << k;
    // The same index read back from its bytes, as the volume cache keeps it.
    const Foreground again(fg.bytes());
    EXPECT_EQ(again.count(), fg.count());
    if (!unset.empty()) {
      EXPECT_EQ(again.Negative(unset.size() - 1), unset.back());
    }
  }
}

TEST(ForegroundTest, DrawsSetElementsAtThePositiveRatio) {
  std::vector<uint8_t> mask(5000, 0);
  for (size_t k = 1200; k < 1300; ++k) mask[k] = 1;  // 2 % of the elements.
  const Foreground fg = Build(mask);
  Rng rng(7);
  int positive = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) positive += mask[fg.Draw(rng, 0.25)];
  // Binomial(20000, 0.25 + 0.75 * 0.02): sd about 62; 5 sd either side.
  EXPECT_NEAR(positive, n * (0.25 + 0.75 * 0.02), 310);
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(mask[fg.Draw(rng, 1.0)], 1);
    EXPECT_EQ(mask[fg.Draw(rng, 0.0)], 0);
  }
}

TEST(ForegroundTest, AnEmptyKindDrawsFromTheOther) {
  Rng rng(1);
  const Foreground none = Build(std::vector<uint8_t>(50, 0));
  const Foreground all = Build(std::vector<uint8_t>(50, 1));
  // No foreground: background draws over all 50; no background: the
  // foreground's. Either way uniform over the elements, never a draw from
  // the empty kind.
  std::set<uint64_t> from_none, from_all;
  for (int i = 0; i < 400; ++i) {
    const uint64_t a = none.Draw(rng, 1.0), b = all.Draw(rng, 0.0);
    ASSERT_LT(a, 50u);
    ASSERT_LT(b, 50u);
    from_none.insert(a);
    from_all.insert(b);
  }
  EXPECT_EQ(from_none.size(), 50u);
  EXPECT_EQ(from_all.size(), 50u);
  EXPECT_EQ(Foreground().Draw(rng, 0.5), 0u);
}

TEST(ForegroundTest, DrawsAreDeterministicPerSeed) {
  std::vector<uint8_t> mask(777);
  for (size_t k = 0; k < mask.size(); ++k) mask[k] = (k * 7919) % 13 == 0;
  const Foreground fg = Build(mask);
  Rng a(42), b(42);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(fg.Draw(a, 0.5), fg.Draw(b, 0.5));
}

}  // namespace
}  // namespace stoker
