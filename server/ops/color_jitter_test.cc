// color_jitter: torchvision's arithmetic on uint8 pixels, drawn per sample.
#include <set>

#include "gtest/gtest.h"
#include "server/pipeline/op_testing.h"
#include "server/ops/pixels.h"

namespace stoker {
namespace {

std::string Spec(const std::string& jitter, int channels = 3) {
  return ImageOpSpec(32, 48, channels, R"("color_jitter": )" + jitter);
}

TEST(ColorJitterTest, FixedFactorsAreTorchvisionsUint8Arithmetic) {
  const std::vector<uint8_t> px = PhotoLike(48, 32, 3, 1);
  auto brightness = CompileJson(Spec(R"({"brightness": {"min": 1.5, "max": 1.5}})"));
  ASSERT_TRUE(brightness.ok()) << brightness.status();
  const std::vector<uint8_t> b = RunPixels(*brightness, 0, px, 1, 0, 0);
  for (size_t i = 0; i < px.size(); ++i) {
    ASSERT_EQ(b[i], std::min(255, static_cast<int>(1.5f * px[i]))) << i;
  }
  // Saturation 0 is rgb_to_grayscale; contrast 0 is the mean of its floor.
  auto gray = CompileJson(Spec(R"({"saturation": {"min": 0, "max": 0}})"));
  ASSERT_TRUE(gray.ok());
  const std::vector<uint8_t> g = RunPixels(*gray, 0, px, 1, 0, 0);
  double sum = 0;
  for (size_t i = 0; i < px.size(); i += 3) {
    for (int k = 0; k < 3; ++k) ASSERT_EQ(g[i + k], Luma(&px[i])) << i;
    sum += Luma(&px[i]);
  }
  auto flat = CompileJson(Spec(R"({"contrast": {"min": 0, "max": 0}})"));
  ASSERT_TRUE(flat.ok());
  const std::vector<uint8_t> m = RunPixels(*flat, 0, px, 1, 0, 0);
  const int mean = static_cast<int>(sum / (px.size() / 3));
  for (uint8_t v : m) ASSERT_EQ(v, mean);
}

TEST(ColorJitterTest, HueTurnsTheCircle) {
  auto half = CompileJson(Spec(R"({"hue": {"min": 0.5, "max": 0.5}})"));
  ASSERT_TRUE(half.ok());
  std::vector<uint8_t> px;
  for (int i = 0; i < 48 * 32; ++i) px.insert(px.end(), {255, 0, 0});  // Red.
  const std::vector<uint8_t> out = RunPixels(*half, 0, px, 3, 1, 4);
  EXPECT_EQ(out[0], 0);  // Cyan.
  EXPECT_EQ(out[1], 255);
  EXPECT_EQ(out[2], 255);
  auto third = CompileJson(Spec(R"({"hue": {"min": 0.33333334, "max": 0.33333334}})"));
  const std::vector<uint8_t> green = RunPixels(*third, 0, px, 3, 1, 4);
  EXPECT_LE(green[0], 1);
  EXPECT_GE(green[1], 254);
  EXPECT_EQ(green[2], 0);
}

TEST(ColorJitterTest, DrawsPerSampleWithinRangesDeterministically) {
  auto p = CompileJson(Spec(R"({"brightness": {"min": 0.5, "max": 1.5},
                               "contrast": {"min": 0.8, "max": 1.2},
                               "hue": {"min": -0.1, "max": 0.1}})"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->deterministic());
  std::set<std::vector<int>> orders;
  for (uint64_t index = 0; index < 64; ++index) {
    const Effects e = EffectsOf(*p, 0, 9, 2, index);
    ASSERT_EQ(e.size(), 1u);
    ASSERT_EQ(e[0].v.size(), 8u);
    orders.insert({int(e[0].v[0]), int(e[0].v[1]), int(e[0].v[2]), int(e[0].v[3])});
    EXPECT_GE(e[0].v[4], 0.5);
    EXPECT_LE(e[0].v[4], 1.5);
    EXPECT_GE(e[0].v[5], 0.8);
    EXPECT_LE(e[0].v[5], 1.2);
    EXPECT_EQ(e[0].v[6], 0);  // Saturation not set.
    EXPECT_GE(e[0].v[7], -0.1);
    EXPECT_LE(e[0].v[7], 0.1);
    EXPECT_EQ(EffectsOf(*p, 0, 9, 2, index)[0].v, e[0].v);  // Same sample, same draw.
  }
  EXPECT_GT(orders.size(), 10u);  // Of 24 orders.
  const std::vector<uint8_t> px = PhotoLike(48, 32, 3, 2);
  EXPECT_EQ(RunPixels(*p, 0, px, 9, 2, 5), RunPixels(*p, 0, px, 9, 2, 5));
  EXPECT_NE(RunPixels(*p, 0, px, 9, 2, 5), RunPixels(*p, 0, px, 9, 3, 5));
}

TEST(ColorJitterTest, GrayTakesBrightnessAndKeepsAlpha) {
  auto gray = CompileJson(Spec(R"({"brightness": {"min": 0.5, "max": 0.5},
                                  "saturation": {"min": 0, "max": 0}})", 1));
  ASSERT_TRUE(gray.ok()) << gray.status();
  const std::vector<uint8_t> px = PhotoLike(48, 32, 1, 3);
  const std::vector<uint8_t> g = RunPixels(*gray, 0, px, 1, 0, 0);
  for (size_t i = 0; i < px.size(); ++i) ASSERT_EQ(g[i], px[i] / 2);
  auto rgba = CompileJson(Spec(R"({"brightness": {"min": 0, "max": 0}})", 4));
  ASSERT_TRUE(rgba.ok());
  const std::vector<uint8_t> a = PhotoLike(48, 32, 4, 4);
  const std::vector<uint8_t> out = RunPixels(*rgba, 0, a, 1, 0, 0);
  for (size_t i = 0; i < a.size(); i += 4) {
    ASSERT_EQ(out[i], 0);
    ASSERT_EQ(out[i + 3], a[i + 3]);
  }
}

TEST(ColorJitterTest, BadParametersAreNamed) {
  const std::pair<const char*, const char*> bad[] = {
      {"{}", "set at least one"},
      {R"({"hue": {"min": -0.6, "max": 0.1}})", "hue"},
      {R"({"brightness": {"min": 1.5, "max": 0.5}})", "brightness"},
      {R"({"saturation": {"min": -1, "max": 1}})", "saturation"},
  };
  for (const auto& [jitter, word] : bad) {
    auto p = CompileJson(Spec(jitter));
    ASSERT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << jitter;
    EXPECT_NE(p.status().message().find("pipeline[1] (color_jitter)"), std::string::npos);
    EXPECT_NE(p.status().message().find(word), std::string::npos) << p.status();
  }
  auto mask = CompileJson(R"({"fields": [{"name": "m", "kind": "KIND_MASK", "shape": [8, 8]}],
      "pipeline": [{"center_crop": {"width": 8, "height": 8}},
                   {"fields": ["m"], "color_jitter": {"hue": {"max": 0.1}}}]})");
  EXPECT_NE(mask.status().message().find("color_jitter applies to images"), std::string::npos)
      << mask.status();
}

}  // namespace
}  // namespace stoker
