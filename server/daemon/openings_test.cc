#include "server/daemon/openings.h"

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(OpeningsTest, EachOpeningIsShownWhileItRunsAndOthersNamesOnlyToAdmins) {
  Openings openings;
  std::shared_ptr<OpeningProgress> mine = openings.Begin(1001, 77, "s3://mine/shards/");
  std::shared_ptr<OpeningProgress> theirs = openings.Begin(1002, 88, "/data/private/train");
  mine->Shards(4, 4000);
  mine->ShardDone();
  mine->Read(1000);
  theirs->Listed(7);
  v1::DaemonStats s;
  openings.AddStats(&s, 1001, false);
  ASSERT_EQ(s.openings_size(), 2);
  const v1::Opening& a = s.openings(0);
  EXPECT_EQ(a.uid(), 1001u);
  EXPECT_EQ(a.pid(), 77u);
  EXPECT_EQ(a.dataset(), "s3://mine/shards/");
  EXPECT_EQ(a.shards(), 4u);
  EXPECT_EQ(a.shards_done(), 1u);
  EXPECT_EQ(a.bytes_read(), 1000u);
  EXPECT_EQ(a.summary().rfind("s3://mine/shards/: 1 of 4 shards, 1.0 of 3.9 KiB read", 0),
            0u) << a.summary();
  const v1::Opening& b = s.openings(1);
  EXPECT_EQ(b.uid(), 1002u);
  EXPECT_EQ(b.pid(), 0u);
  EXPECT_EQ(b.listed(), 7u);
  EXPECT_EQ(b.dataset(), "(another user's dataset)");
  EXPECT_EQ(b.summary().find("private"), std::string::npos) << b.summary();
  EXPECT_FALSE(b.has_seconds_left());
  v1::DaemonStats admin;
  openings.AddStats(&admin, 0, true);
  ASSERT_EQ(admin.openings_size(), 2);
  EXPECT_EQ(admin.openings(1).dataset(), "/data/private/train");
  EXPECT_EQ(admin.openings(1).pid(), 88u);
  // Done: no longer shown.
  mine.reset();
  v1::DaemonStats after;
  openings.AddStats(&after, 1001, false);
  ASSERT_EQ(after.openings_size(), 1);
  EXPECT_EQ(after.openings(0).uid(), 1002u);
  theirs.reset();
  v1::DaemonStats none;
  openings.AddStats(&none, 1001, false);
  EXPECT_EQ(none.openings_size(), 0);
}

TEST(OpeningsTest, ANameIsShownEscapedAndCut) {
  Openings openings;
  std::shared_ptr<OpeningProgress> p =
      openings.Begin(1001, 1, "s3://b/x\nopening (uid 0) forged\x1b[2J" + std::string(1000, 'k'));
  v1::DaemonStats s;
  openings.AddStats(&s, 1001, false);
  ASSERT_EQ(s.openings_size(), 1);
  const std::string& name = s.openings(0).dataset();
  EXPECT_EQ(name.find('\n'), std::string::npos) << name;
  EXPECT_EQ(name.find('\x1b'), std::string::npos) << name;
  EXPECT_EQ(name.rfind("s3://b/x\\nopening (uid 0) forged\\x1b[2J", 0), 0u) << name;
  EXPECT_LT(name.size(), 300u);
  EXPECT_EQ(s.openings(0).summary().find('\n'), std::string::npos);
}

}  // namespace
}  // namespace stoker
