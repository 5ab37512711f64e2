#include "client/cpp/top.h"

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(TopTest, FitsEightyColumnsAndShowsSessionsPoolsCaches) {
  v1::DaemonStats s;
  s.set_pid(42);
  s.set_version("0.1.0");
  s.set_samples_decoded(1000);
  v1::SessionStats* ss = s.add_sessions();
  ss->set_session_id(7);
  ss->set_dataset("folder:/a/very/long/path/to/some/imagenet/train");
  ss->set_images_per_second(1234);
  ss->set_ring_ready(3);
  ss->set_ring_slots(4);
  ss->set_client_wait_fraction(0.125);
  ss->set_diagnosis(v1::DIAGNOSIS_DECODE_BOUND);
  ss->set_pixel_mode(v1::PIXEL_MODE_NOT_KEPT);
  v1::PoolStats* p = s.add_pools();
  p->set_pool("decode");
  p->set_threads(2);
  p->set_busy_fraction(0.97);
  v1::TierStats* t = s.add_tiers();
  t->set_tier("l1");
  t->set_enabled(true);
  t->set_hits(3);
  t->set_misses(1);
  std::string screen = RenderTop(s, "/run/stoker/stoker.sock", 80);
  for (absl::string_view line : absl::StrSplit(screen, '\n')) {
    EXPECT_LE(line.size(), 80u) << line;
  }
  EXPECT_NE(screen.find("7 "), std::string::npos);
  EXPECT_NE(screen.find("1234"), std::string::npos);
  EXPECT_NE(screen.find("3/4"), std::string::npos);
  EXPECT_NE(screen.find("12.5"), std::string::npos);
  EXPECT_NE(screen.find("decode-bound"), std::string::npos);
  EXPECT_NE(screen.find("not-kept"), std::string::npos);
  EXPECT_NE(screen.find("97.0"), std::string::npos);
  EXPECT_NE(screen.find("l1 75.0%"), std::string::npos);
  EXPECT_NE(screen.find("..."), std::string::npos);  // Long path shortened.
  EXPECT_NE(screen.find("imagenet/train"), std::string::npos);
  EXPECT_EQ(RenderTop(s, "x", 40).find("decode-bound"), std::string::npos);
  // The longest diagnosis and pixel mode still fit 80 columns whole.
  ss->set_diagnosis(v1::DIAGNOSIS_STARVED_BY_FAIR_SHARE);
  ss->set_pixel_mode(v1::PIXEL_MODE_PARTLY_KEPT);
  screen = RenderTop(s, "/run/stoker/stoker.sock", 80);
  for (absl::string_view line : absl::StrSplit(screen, '\n')) {
    EXPECT_LE(line.size(), 80u) << line;
  }
  EXPECT_NE(screen.find("starved-by-fair-share partly-kept"), std::string::npos) << screen;
  // A wide terminal shows more of the dataset.
  EXPECT_NE(RenderTop(s, "x", 120).find("some/imagenet/train"), std::string::npos);
}

}  // namespace
}  // namespace stoker
