#include "server/access/ring_quota.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace stoker {
namespace {

constexpr uint64_t kMiB = 1 << 20;

TEST(RingQuotaTest, PerUserBytesBindUsersNotAdmins) {
  RingQuota q(RingLimits{0, 100 * kMiB, 0});
  const Caller alice = Caller::User(1001, false);
  const Caller bob = Caller::User(1002, false);
  ASSERT_TRUE(q.Reserve(alice, 1, 60 * kMiB).ok());
  const absl::Status over = q.Reserve(alice, 2, 60 * kMiB);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.message().find("--max-ring-bytes-per-user"), std::string::npos)
      << over.message();
  // Another user, and an admin, have their own room.
  EXPECT_TRUE(q.Reserve(bob, 3, 60 * kMiB).ok());
  EXPECT_TRUE(q.Reserve(Caller::User(0, true), 4, 500 * kMiB).ok());
  EXPECT_EQ(q.bytes_of(1001), 60 * kMiB);
  EXPECT_EQ(q.bytes(), 620 * kMiB);
  // A closed session gives its bytes back.
  q.Release(1);
  EXPECT_TRUE(q.Reserve(alice, 2, 60 * kMiB).ok());
  EXPECT_EQ(q.bytes_of(1001), 60 * kMiB);
}

TEST(RingQuotaTest, NodeWideBytesBindEveryone) {
  RingQuota q(RingLimits{100 * kMiB, 0, 0});
  ASSERT_TRUE(q.Reserve(Caller(), 1, 70 * kMiB).ok());
  const absl::Status over = q.Reserve(Caller::User(0, true), 2, 40 * kMiB);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.message().find("--max-ring-bytes "), std::string::npos) << over.message();
  EXPECT_EQ(q.bytes(), 70 * kMiB);  // Nothing of a refusal is counted.
  EXPECT_TRUE(q.Reserve(Caller::User(7, false), 3, 30 * kMiB).ok());
}

TEST(RingQuotaTest, SessionsPerUserCountReservationsInFlight) {
  RingQuota q(RingLimits{0, 0, 2});
  const Caller alice = Caller::User(1001, false);
  ASSERT_TRUE(q.Reserve(alice, 1, kMiB).ok());
  ASSERT_TRUE(q.Reserve(alice, 2, kMiB).ok());
  EXPECT_EQ(q.Reserve(alice, 3, kMiB).code(), absl::StatusCode::kResourceExhausted);
  // Reserving an id again replaces it rather than counting it twice.
  EXPECT_TRUE(q.Reserve(alice, 2, 2 * kMiB).ok());
  EXPECT_EQ(q.bytes_of(1001), 3 * kMiB);
  q.Release(2);
  EXPECT_TRUE(q.Reserve(alice, 3, kMiB).ok());
}

TEST(RingQuotaTest, HandedOverRingsCountForTheirNewOwner) {
  RingQuota q(RingLimits{0, 10 * kMiB, 0});
  // In-process opens (uid -1) whose rings are then taken by a user.
  ASSERT_TRUE(q.Reserve(Caller(), 1, 8 * kMiB).ok());
  q.SetOwner(1, 1001);
  EXPECT_EQ(q.bytes_of(1001), 8 * kMiB);
  EXPECT_EQ(q.Reserve(Caller::User(1001, false), 2, 4 * kMiB).code(),
            absl::StatusCode::kResourceExhausted);
  q.SetOwner(99, 1001);  // An unknown session changes nothing.
  EXPECT_EQ(q.bytes(), 8 * kMiB);
}

}  // namespace
}  // namespace stoker
