// resize: the shorter side to size (torchvision's Resize(size)), or an
// exact width x height, with the interpolation asked for.
#include <cstdlib>

#include "gtest/gtest.h"
#include "server/pipeline/op_testing.h"

namespace stoker {
namespace {

std::string Spec(int size, const std::string& resize, const std::string& then = "") {
  const std::string s = std::to_string(size);
  return R"({"fields": [{"name": "image", "kind": "KIND_IMAGE", "shape": [)" + s + ", " + s +
         R"(, 3]}], "pipeline": [{"resize": )" + resize + "}" + then + "]}";
}

TEST(ResizeTest, ConstantsStayAndTheSameSizeIsThePicture) {
  const std::vector<uint8_t> flat(40 * 40 * 3, 77);
  for (const char* mode : {"nearest", "bilinear", "bicubic"}) {
    auto p = CompileJson(Spec(16, std::string(R"({"mode": "exact", "width": 16, "height": 16,
                                                   "interpolation": ")") + mode + "\"}"));
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(Render(*p, 0, flat, 40, 40, 3, 0, 0, 0), std::vector<uint8_t>(16 * 16 * 3, 77))
        << mode;
    auto same = CompileJson(Spec(40, std::string(R"({"mode": "exact", "width": 40, "height": 40,
                                                      "interpolation": ")") + mode + "\"}"));
    ASSERT_TRUE(same.ok());
    const std::vector<uint8_t> px = Coordinates(40, 40);
    EXPECT_EQ(Render(*same, 0, px, 40, 40, 3, 0, 0, 0), px) << mode;
  }
}

TEST(ResizeTest, TheShorterSideBecomesSize) {
  // 40 x 20 to a shorter side of 10 (20 x 10), then its center 10 x 10:
  // source columns 10..29, two per output column.
  auto p = CompileJson(Spec(10, R"({"size": 10, "interpolation": "nearest"})",
                            R"(, {"center_crop": {"width": 10, "height": 10}})"));
  ASSERT_TRUE(p.ok()) << p.status();
  const std::vector<uint8_t> out = Render(*p, 0, Coordinates(40, 20), 40, 20, 3, 0, 0, 0);
  for (int y = 0; y < 10; ++y) {
    for (int x = 0; x < 10; ++x) {
      ASSERT_LE(std::abs(out[(y * 10 + x) * 3] - (10 + 2 * x)), 1) << x << "," << y;
      ASSERT_LE(std::abs(out[(y * 10 + x) * 3 + 1] - 2 * y), 1) << x << "," << y;
    }
  }
  EXPECT_FALSE(CompileJson(Spec(10, R"({"size": 10, "interpolation": "sideways"})")).ok());
}

}  // namespace
}  // namespace stoker
