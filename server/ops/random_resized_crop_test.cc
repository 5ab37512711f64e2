// random_resized_crop: torchvision's RandomResizedCrop box (area within
// scale, aspect within ratio, drawn per sample), resized to the field.
#include <cmath>

#include "gtest/gtest.h"
#include "server/pipeline/op_testing.h"

namespace stoker {
namespace {

std::string Spec(const std::string& params) {
  return R"({"fields": [{"name": "image", "kind": "KIND_IMAGE", "shape": [20, 30, 3]}],
             "pipeline": [{"random_resized_crop": {"width": 30, "height": 20)" + params +
         "}}]}";
}

TEST(RandomResizedCropTest, BoxesKeepTheScaleAndRatioRanges) {
  auto p = CompileJson(Spec(R"(, "scale_min": 0.2, "scale_max": 0.6, "ratio_min": 0.5,
                               "ratio_max": 2)"));
  ASSERT_TRUE(p.ok()) << p.status();
  const int w = 300, h = 200;
  int distinct = 0;
  double last_x = -1;
  for (uint64_t index = 0; index < 300; ++index) {
    const CropBox b = p->Plan(w, h, 2, 0, index)[0].src;
    const double area = b.w * b.h / (w * h), ratio = b.w / b.h;
    // Integer box sides round the drawn area and ratio a little.
    ASSERT_GE(area, 0.2 * 0.97) << index;
    ASSERT_LE(area, 0.6 * 1.03) << index;
    ASSERT_GE(ratio, 0.5 * 0.97) << index;
    ASSERT_LE(ratio, 2 * 1.03) << index;
    ASSERT_GE(b.x, 0);
    ASSERT_LE(b.x + b.w, w);
    ASSERT_LE(b.y + b.h, h);
    distinct += b.x != last_x;
    last_x = b.x;
  }
  EXPECT_GT(distinct, 250);
}

TEST(RandomResizedCropTest, TheWholePictureAtItsSizeIsThePicture) {
  auto p = CompileJson(Spec(R"(, "scale_min": 1, "scale_max": 1, "ratio_min": 1.5,
                               "ratio_max": 1.5, "interpolation": "nearest")"));
  ASSERT_TRUE(p.ok()) << p.status();
  const std::vector<uint8_t> px = Coordinates(30, 20);
  for (uint64_t index = 0; index < 20; ++index) {
    ASSERT_EQ(Render(*p, 0, px, 30, 20, 3, 1, 0, index), px) << index;
  }
  EXPECT_FALSE(CompileJson(Spec(R"(, "scale_min": 0.8, "scale_max": 0.2)")).ok());
}

}  // namespace
}  // namespace stoker
