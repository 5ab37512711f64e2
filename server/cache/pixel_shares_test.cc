#include "server/cache/pixel_shares.h"

#include <string>

#include "gtest/gtest.h"

namespace stoker {
namespace {

constexpr uint64_t kMiB = 1 << 20;

TEST(PixelSharesTest, AClaimThatFitsIsGrantedAndOneThatDoesNotIsRefusedWithItsSizes) {
  PixelShares shares(100 * kMiB);
  std::string why;
  auto a = shares.Ask(1, "ds1", 1001, 60 * kMiB, &why);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->granted.load());
  // The same user's second session: 60 + 50 > 100.
  EXPECT_EQ(shares.Ask(2, "ds2", 1001, 50 * kMiB, &why), nullptr);
  EXPECT_NE(why.find("50 MiB"), std::string::npos) << why;
  EXPECT_NE(why.find("110 MiB"), std::string::npos) << why;
  EXPECT_NE(why.find("--pixel-cache-bytes 100 MiB"), std::string::npos) << why;
  EXPECT_EQ(shares.claimed(), 60 * kMiB);
  // A revised estimate replaces the first.
  ASSERT_NE(shares.Ask(1, "ds1", 1001, 90 * kMiB, &why), nullptr);
  EXPECT_EQ(shares.claimed(), 90 * kMiB);
}

TEST(PixelSharesTest, ANewcomerWithinItsShareRevokesTheOverShareUsersNewestClaims) {
  PixelShares shares(100 * kMiB);
  std::string why;
  auto old_claim = shares.Ask(1, "ds1", 1001, 40 * kMiB, &why);
  auto new_claim = shares.Ask(2, "ds2", 1001, 40 * kMiB, &why);
  ASSERT_NE(old_claim, nullptr);
  ASSERT_NE(new_claim, nullptr);
  // Bob's 45 MiB is within his half; Alice's 80 MiB is over hers.
  auto bob = shares.Ask(3, "ds3", 1002, 45 * kMiB, &why);
  ASSERT_NE(bob, nullptr) << why;
  EXPECT_TRUE(old_claim->granted.load());
  EXPECT_FALSE(new_claim->granted.load());  // The newest gave way.
  EXPECT_EQ(shares.claimed(), 85 * kMiB);
  EXPECT_EQ(shares.share(), 50 * kMiB);
  // Over his share Bob is refused, and his grant stands no more.
  EXPECT_EQ(shares.Ask(3, "ds3", 1002, 55 * kMiB, &why), nullptr);
  EXPECT_FALSE(bob->granted.load());
  EXPECT_NE(why.find("share of the pixel cache is 50 MiB"), std::string::npos) << why;
}

// Two users reading one shared dataset: the second joins the first's claim
// (the entries are the same), is charged nothing, and holds the claim when
// the first leaves.
TEST(PixelSharesTest, AnotherUsersSessionsOverTheSameContentJoinItsClaim) {
  PixelShares shares(100 * kMiB);
  std::string why;
  auto alice = shares.Ask(1, "imagenet|scales", 1001, 70 * kMiB, &why);
  ASSERT_NE(alice, nullptr);
  // Over Bob's half on its own, but the pictures are kept already.
  auto bob = shares.Ask(2, "imagenet|scales", 1002, 70 * kMiB, &why);
  ASSERT_EQ(bob, alice) << why;
  EXPECT_EQ(shares.claimed(), 70 * kMiB);
  EXPECT_EQ(shares.share(), 100 * kMiB);  // One user charged.
  shares.Release(1);
  EXPECT_TRUE(bob->granted.load());
  EXPECT_EQ(shares.released(), 0u);  // Still held, by Bob now.
  // A third user's claim within half revokes it as Bob's.
  auto carol = shares.Ask(3, "other", 1003, 45 * kMiB, &why);
  ASSERT_NE(carol, nullptr) << why;
  EXPECT_FALSE(bob->granted.load());
  shares.Release(2);
  EXPECT_EQ(shares.claimed(), 45 * kMiB);
}

TEST(PixelSharesTest, UsersWithinTheirSharesAreNeverRevoked) {
  PixelShares shares(100 * kMiB);
  std::string why;
  auto a = shares.Ask(1, "ds1", 1, 22 * kMiB, &why);
  auto b = shares.Ask(2, "ds2", 2, 22 * kMiB, &why);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(shares.Ask(3, "ds3", 3, 70 * kMiB, &why), nullptr);  // Over a third.
  auto c = shares.Ask(3, "ds3", 3, 33 * kMiB, &why);
  ASSERT_NE(c, nullptr) << why;
  // A fourth user's quarter: only the third user is over it, and gives way.
  auto d = shares.Ask(4, "ds4", 4, 25 * kMiB, &why);
  ASSERT_NE(d, nullptr) << why;
  EXPECT_TRUE(a->granted.load() && b->granted.load() && d->granted.load());
  EXPECT_FALSE(c->granted.load());
  EXPECT_EQ(shares.claimed(), 69 * kMiB);
  shares.Release(2);
  EXPECT_FALSE(b->granted.load());
  EXPECT_EQ(shares.claimed(), 47 * kMiB);
}

TEST(PixelSharesTest, SessionsOfOneUserOverOneContentHoldOneClaim) {
  PixelShares shares(100 * kMiB);
  std::string why;
  // Eight ranks of a job on this node, each estimating the whole dataset.
  std::shared_ptr<const PixelShares::Claim> first;
  for (uint64_t rank = 0; rank < 8; ++rank) {
    auto claim = shares.Ask(10 + rank, "folder:/data|whole", 1001, 60 * kMiB, &why);
    ASSERT_NE(claim, nullptr) << rank << ": " << why;
    if (first == nullptr) first = claim;
    EXPECT_EQ(claim, first);
  }
  EXPECT_EQ(shares.claimed(), 60 * kMiB);
  for (uint64_t rank = 0; rank < 7; ++rank) shares.Release(10 + rank);
  EXPECT_TRUE(first->granted.load());  // One rank still holds it.
  EXPECT_EQ(shares.claimed(), 60 * kMiB);
  shares.Release(17);
  EXPECT_FALSE(first->granted.load());
  EXPECT_EQ(shares.claimed(), 0u);
}

}  // namespace
}  // namespace stoker
