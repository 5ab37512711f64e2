#include "server/serve/pixel_keeper.h"

#include <string>

#include "gtest/gtest.h"

namespace stoker {
namespace {

constexpr uint64_t kMiB = 1 << 20;

v1::SessionStats StatsOf(const PixelKeeper& k) {
  v1::SessionStats s;
  k.Stats(&s);
  return s;
}

TEST(PixelKeeperTest, TurnedOffItKeepsNothingAndReleasesItsClaim) {
  PixelShares shares(100 * kMiB);
  auto k = PixelKeeper::Automatic(&shares, 1, 1001, "ds1", 16, 1);
  for (int i = 0; i < 16; ++i) k->Keep(kMiB);
  ASSERT_GT(shares.claimed(), 0u);
  k->TurnOff("finished samples are kept");
  EXPECT_EQ(shares.claimed(), 0u);
  EXPECT_FALSE(k->Lookup());
  EXPECT_EQ(StatsOf(*k).pixel_mode(), v1::PIXEL_MODE_OFF);
}

TEST(PixelKeeperTest, OffAndBoundedNeverKeepAutomatically) {
  auto off = PixelKeeper::Off("asked off (pixel_cache.off)");
  EXPECT_FALSE(off->Lookup());
  EXPECT_FALSE(off->Keep(100));
  EXPECT_EQ(StatsOf(*off).pixel_mode(), v1::PIXEL_MODE_OFF);
  EXPECT_EQ(StatsOf(*off).pixel_cache_why(), "asked off (pixel_cache.off)");
  auto bounded = PixelKeeper::Bounded(64);
  EXPECT_TRUE(bounded->Lookup());
  EXPECT_FALSE(bounded->automatic());
  EXPECT_EQ(StatsOf(*bounded).pixel_mode(), v1::PIXEL_MODE_BOUNDED);
}

TEST(PixelKeeperTest, ADatasetThatFitsIsKeptAndItsEstimateRevised) {
  PixelShares shares(100 * kMiB);
  // 1,000 samples of one picture each.
  auto k = PixelKeeper::Automatic(&shares, 1, 1001, "ds1", 1000, 1);
  EXPECT_EQ(StatsOf(*k).pixel_mode(), v1::PIXEL_MODE_ESTIMATING);
  for (uint64_t i = 0; i + 1 < PixelKeeper::kFirstEstimate; ++i) {
    EXPECT_TRUE(k->Keep(10 * 1024));
    EXPECT_EQ(shares.claimed(), 0u);  // Still measuring.
  }
  EXPECT_TRUE(k->Keep(10 * 1024));
  EXPECT_EQ(StatsOf(*k).pixel_mode(), v1::PIXEL_MODE_KEPT);
  constexpr uint64_t kOver = PixelKeeper::kEntryOverhead;
  EXPECT_EQ(StatsOf(*k).pixel_cache_bytes(), 1000 * (10 * 1024 + kOver));
  EXPECT_EQ(shares.claimed(), 1000 * (10 * 1024 + kOver));
  // Larger pictures later: the claim follows at 32 pictures measured.
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(k->Keep(30 * 1024));
  EXPECT_EQ(shares.claimed(), 1000 * (20 * 1024 + kOver));
  EXPECT_TRUE(k->Lookup());
  k.reset();
  EXPECT_EQ(shares.claimed(), 0u);  // Released with the session.
}

TEST(PixelKeeperTest, ADatasetThatDoesNotFitIsNotKeptAndNotLookedUp) {
  PixelShares shares(10 * kMiB);
  auto k = PixelKeeper::Automatic(&shares, 1, 1001, "ds1", 100000, 1);
  for (uint64_t i = 0; i + 1 < PixelKeeper::kFirstEstimate; ++i) k->Keep(64 * 1024);
  EXPECT_FALSE(k->Keep(64 * 1024));
  const v1::SessionStats s = StatsOf(*k);
  EXPECT_EQ(s.pixel_mode(), v1::PIXEL_MODE_NOT_KEPT);
  EXPECT_NE(s.pixel_cache_why().find("--pixel-cache-bytes 10 MiB"), std::string::npos)
      << s.pixel_cache_why();
  EXPECT_EQ(s.pixel_cache_bytes(), uint64_t{100000} * (64 * 1024 + PixelKeeper::kEntryOverhead));
  EXPECT_FALSE(k->Lookup());
  EXPECT_FALSE(k->Keep(64 * 1024));
  EXPECT_EQ(shares.claimed(), 0u);
}

TEST(PixelKeeperTest, MoreScalesOfKeptPicturesAreClaimedAsTheyGrowTheMean) {
  PixelShares shares(100 * kMiB);
  auto k = PixelKeeper::Automatic(&shares, 1, 1001, "ds1", 16, 1);
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(k->Keep(2 * kMiB));
  const uint64_t per = 2 * kMiB + PixelKeeper::kEntryOverhead;
  EXPECT_EQ(StatsOf(*k).pixel_cache_bytes(), 16 * per);
  // Half-scale entries of 4 pictures: a quarter of their bytes each, the
  // mean grows by 1/16, within the claim's slack of an eighth.
  const uint64_t quarter = kMiB / 2;
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(k->Keep(quarter, /*another_scale=*/true));
  EXPECT_EQ(StatsOf(*k).pixel_cache_bytes(), 16 * per);
  // Four more grow it past an eighth: claimed again, for 16 pictures.
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(k->Keep(quarter, true));
  const uint64_t grown = 16 * per + 8 * (quarter + PixelKeeper::kEntryOverhead);
  EXPECT_EQ(StatsOf(*k).pixel_cache_bytes(), grown);
  EXPECT_EQ(shares.claimed(), grown);
  EXPECT_EQ(StatsOf(*k).pixel_mode(), v1::PIXEL_MODE_KEPT);
  // Scales past the cache: refused on revision, partly kept.
  for (int i = 0; i < 32 && k->Keep(8 * kMiB, true); ++i) {
  }
  EXPECT_EQ(StatsOf(*k).pixel_mode(), v1::PIXEL_MODE_PARTLY_KEPT);
  EXPECT_FALSE(k->Wants());
  EXPECT_TRUE(k->Lookup());
}

TEST(PixelKeeperTest, ASessionFindingItsPicturesKeptClaimsThem) {
  PixelShares shares(100 * kMiB);
  auto k = PixelKeeper::Automatic(&shares, 1, 1001, "ds1", 32, 1);
  for (int i = 0; i < 16; ++i) k->Found(kMiB);
  EXPECT_EQ(StatsOf(*k).pixel_mode(), v1::PIXEL_MODE_KEPT);
  const uint64_t claimed = 32 * (kMiB + PixelKeeper::kEntryOverhead);
  EXPECT_EQ(shares.claimed(), claimed);
  // Once claimed, pictures found again every epoch are not counted again.
  for (int i = 0; i < 64; ++i) k->Found(4 * kMiB);
  EXPECT_EQ(StatsOf(*k).pixel_cache_bytes(), claimed);
  EXPECT_EQ(shares.claimed(), claimed);
}

TEST(PixelKeeperTest, RevokedClaims) {
  PixelShares shares(100 * kMiB);
  // Alice keeps 80 MiB; Bob's 40 MiB within his half takes her room.
  auto alice = PixelKeeper::Automatic(&shares, 2, 1001, "ds2", 16, 1);
  for (int i = 0; i < 16; ++i) alice->Keep(5 * kMiB);
  ASSERT_EQ(StatsOf(*alice).pixel_mode(), v1::PIXEL_MODE_KEPT);
  auto bob = PixelKeeper::Automatic(&shares, 3, 1002, "ds3", 16, 1);
  for (int i = 0; i < 16; ++i) bob->Keep(5 * kMiB / 2);
  EXPECT_EQ(StatsOf(*bob).pixel_mode(), v1::PIXEL_MODE_KEPT);
  EXPECT_EQ(StatsOf(*alice).pixel_mode(), v1::PIXEL_MODE_PARTLY_KEPT);
  EXPECT_FALSE(alice->Wants());         // She decodes nothing more for it,
  EXPECT_FALSE(alice->Keep(5 * kMiB));  // and inserts nothing more.
  EXPECT_TRUE(alice->Lookup());         // What she kept may still be there,
  EXPECT_FALSE(alice->Refreshes());     // left to age out first.
  EXPECT_TRUE(bob->Refreshes());
  // Bob leaves: Alice asks again as she looks up, and keeps.
  bob.reset();
  EXPECT_TRUE(alice->Lookup());
  EXPECT_EQ(StatsOf(*alice).pixel_mode(), v1::PIXEL_MODE_KEPT);
  EXPECT_TRUE(alice->Wants());
  EXPECT_TRUE(alice->Refreshes());
  EXPECT_EQ(shares.claimed(), 16 * (5 * kMiB + PixelKeeper::kEntryOverhead));
}

TEST(PixelKeeperTest, ARefusedDatasetAsksAgainOnlyAfterRoomIsGivenBack) {
  PixelShares shares(100 * kMiB);
  auto alice = PixelKeeper::Automatic(&shares, 1, 1001, "ds1", 16, 1);
  for (int i = 0; i < 16; ++i) alice->Keep(3 * kMiB);  // 48 MiB, within her half.
  auto bob = PixelKeeper::Automatic(&shares, 2, 1002, "ds2", 16, 1);
  for (int i = 0; i < 16; ++i) bob->Keep(4 * kMiB);  // 64 MiB: over his half.
  ASSERT_EQ(StatsOf(*bob).pixel_mode(), v1::PIXEL_MODE_NOT_KEPT);
  EXPECT_FALSE(bob->Lookup());  // Nothing released: not asked again.
  alice.reset();
  EXPECT_TRUE(bob->Lookup());  // Alone now: the whole cache is his share.
  EXPECT_EQ(StatsOf(*bob).pixel_mode(), v1::PIXEL_MODE_KEPT);
  EXPECT_TRUE(bob->Wants());
}

}  // namespace
}  // namespace stoker
