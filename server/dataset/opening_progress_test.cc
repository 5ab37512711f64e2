#include "server/dataset/opening_progress.h"

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(OpeningProgressTest, SaysWhatIsKnownAndTheTimeLeftAtTheRateSoFar) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  OpeningProgress p(t0);
  EXPECT_EQ(p.Summary("s3://b/x/", t0 + absl::Seconds(1)), "s3://b/x/: starting, 1 s so far");
  p.Listed(1200);
  p.Listed(34);
  EXPECT_EQ(p.Summary("s3://b/x/", t0 + absl::Seconds(2)),
            "s3://b/x/: 1,234 listed, 2 s so far");
  p.Shards(147, uint64_t{54} << 30);
  for (int i = 0; i < 12; ++i) p.ShardDone();
  p.Read(uint64_t{27} << 29);  // 13.5 GiB in 60 s: 40.5 GiB at that rate, 180 s.
  const OpeningProgress::View v = p.Now(t0 + absl::Seconds(60));
  EXPECT_EQ(v.shards_done, 12u);
  EXPECT_EQ(v.left, absl::Seconds(180));
  EXPECT_EQ(p.Summary("s3://b/x/", t0 + absl::Seconds(60)),
            "s3://b/x/: 1,234 listed, 12 of 147 shards, 13.5 of 54.0 GiB read, about 3 min "
            "left, 60 s so far");
  // Nothing read yet: no time left to say.
  OpeningProgress fresh(t0);
  fresh.Shards(3, 5000);
  EXPECT_EQ(fresh.Now(t0 + absl::Seconds(5)).left, absl::InfiniteDuration());
  EXPECT_EQ(fresh.Summary("d", t0 + absl::Seconds(5)),
            "d: 0 of 3 shards, 0.0 of 4.9 KiB read, 5 s so far");
}

}  // namespace
}  // namespace stoker
