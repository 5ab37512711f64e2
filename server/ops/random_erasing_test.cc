// random_erasing: torchvision's rectangle draw and fill, per sample.
#include <cmath>
#include <set>

#include "gtest/gtest.h"
#include "server/pipeline/op_testing.h"

namespace stoker {
namespace {

std::string Spec(const std::string& erase, int channels = 3) {
  return ImageOpSpec(40, 60, channels, R"("random_erasing": )" + erase);
}

// The erased rectangle: rows/columns where out differs from in, checked
// to be exactly a filled box of `fill`.
struct Box {
  int top = -1, left = -1, h = 0, w = 0;
};
Box Erased(const std::vector<uint8_t>& in, const std::vector<uint8_t>& out, int w, int c,
           const std::vector<uint8_t>& fill) {
  Box b;
  int bottom = -1, right = -1;
  for (size_t i = 0; i < in.size(); i += c) {
    bool same = true;
    for (int k = 0; k < c; ++k) same = same && in[i + k] == out[i + k];
    if (same) continue;
    const int y = static_cast<int>(i / c / w), x = static_cast<int>(i / c % w);
    if (b.top < 0 || y < b.top) b.top = y;
    if (b.left < 0 || x < b.left) b.left = x;
    bottom = std::max(bottom, y);
    right = std::max(right, x);
  }
  if (b.top < 0) return b;
  b.h = bottom - b.top + 1;
  b.w = right - b.left + 1;
  for (int y = b.top; y <= bottom; ++y) {
    for (int x = b.left; x <= right; ++x) {
      for (int k = 0; k < c; ++k) EXPECT_EQ(out[(y * w + x) * c + k], fill[k]) << y << "," << x;
    }
  }
  return b;
}

TEST(RandomErasingTest, FillsAFixedSizeBoxAtDrawnPlaces) {
  // scale 0.15 of 40 x 60, ratio 1.5: h = round(sqrt(360 * 1.5)) = 23,
  // w = round(sqrt(360 / 1.5)) = 15 (torchvision's arithmetic).
  auto p = CompileJson(Spec(R"({"probability": 1, "scale": {"min": 0.15, "max": 0.15},
                               "ratio": {"min": 1.5, "max": 1.5}, "value": [10, 20, 30]})"));
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<uint8_t> px = PhotoLike(60, 40, 3, 1);
  for (uint8_t& v : px) v = std::max<uint8_t>(v, 31);  // Never already the fill.
  std::set<std::pair<int, int>> places;
  for (uint64_t index = 0; index < 40; ++index) {
    const Box b = Erased(px, RunPixels(*p, 0, px, 2, 0, index), 60, 3, {10, 20, 30});
    EXPECT_EQ(b.h, 23);
    EXPECT_EQ(b.w, 15);
    places.insert({b.top, b.left});
  }
  EXPECT_GT(places.size(), 20u);
}

TEST(RandomErasingTest, DefaultsAreTorchvisions) {
  auto p = CompileJson(Spec("{}"));
  ASSERT_TRUE(p.ok()) << p.status();
  const std::vector<uint8_t> px = PhotoLike(60, 40, 3, 2);
  int erased = 0;
  for (uint64_t index = 0; index < 400; ++index) {
    std::vector<uint8_t> in = px;
    for (uint8_t& v : in) v = std::max<uint8_t>(v, 1);
    const Box b = Erased(in, RunPixels(*p, 0, in, 3, 1, index), 60, 3, {0, 0, 0});
    if (b.top < 0) continue;
    ++erased;
    const double area = double(b.h) * b.w / (40.0 * 60.0);
    EXPECT_GE(area, 0.02 * 0.6) << b.h << "x" << b.w;  // Rounded sides.
    EXPECT_LE(area, 0.33 * 1.4);
    EXPECT_LT(b.h, 40);
    EXPECT_LT(b.w, 60);
  }
  EXPECT_GT(erased, 160);  // p = 0.5 of 400 (a few draws find no fit).
  EXPECT_LT(erased, 240);
}

TEST(RandomErasingTest, BadParametersAreNamed) {
  const std::pair<const char*, const char*> bad[] = {
      {R"({"probability": 2})", "probability"},
      {R"({"scale": {"min": 0.5, "max": 1.5}})", "scale"},
      {R"({"ratio": {"min": 0, "max": 1}})", "ratio"},
      {R"({"value": [300]})", "value 300"},
      {R"({"value": [1, 2]})", "1 or 3 levels"},
  };
  for (const auto& [erase, word] : bad) {
    auto p = CompileJson(Spec(erase));
    ASSERT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << erase;
    EXPECT_NE(p.status().message().find(word), std::string::npos) << p.status();
  }
}

}  // namespace
}  // namespace stoker
