// center_crop: torchvision's CenterCrop window, padded with the fill where
// the picture is smaller.
#include "gtest/gtest.h"
#include "server/pipeline/op_testing.h"

namespace stoker {
namespace {

std::string Spec(int height, int width) {
  const std::string h = std::to_string(height), w = std::to_string(width);
  return R"({"fields": [{"name": "image", "kind": "KIND_IMAGE", "shape": [)" + h + ", " + w +
         R"(, 3]}], "pipeline": [{"center_crop": {"width": )" + w + R"(, "height": )" + h +
         "}}]}";
}

TEST(CenterCropTest, KeepsTorchvisionsWindow) {
  const std::vector<uint8_t> px = Coordinates(21, 10);
  auto p = CompileJson(Spec(6, 8));
  ASSERT_TRUE(p.ok()) << p.status();
  // torchvision: top = round((10 - 6) / 2) = 2, left = round((21 - 8) / 2) = 6.
  const std::vector<uint8_t> out = Render(*p, 0, px, 21, 10, 3, 0, 0, 0);
  for (int y = 0; y < 6; ++y) {
    for (int x = 0; x < 8; ++x) {
      ASSERT_EQ(out[(y * 8 + x) * 3], 6 + x);
      ASSERT_EQ(out[(y * 8 + x) * 3 + 1], 2 + y);
    }
  }
  // The same for every sample: nothing is drawn.
  EXPECT_EQ(Render(*p, 0, px, 21, 10, 3, 9, 3, 41), out);
}

TEST(CenterCropTest, ASmallerPictureIsCenteredOnPadding) {
  const std::vector<uint8_t> px(4 * 2 * 3, 200);
  auto p = CompileJson(Spec(6, 8));
  ASSERT_TRUE(p.ok());
  const std::vector<uint8_t> out = Render(*p, 0, px, 4, 2, 3, 0, 0, 0);
  int kept = 0;
  for (int y = 0; y < 6; ++y) {
    for (int x = 0; x < 8; ++x) {
      const bool inside = x >= 2 && x < 6 && y >= 2 && y < 4;
      ASSERT_EQ(out[(y * 8 + x) * 3], inside ? 200 : 0) << x << "," << y;
      kept += inside;
    }
  }
  EXPECT_EQ(kept, 8);
  EXPECT_FALSE(CompileJson(Spec(0, 8)).ok());
}

}  // namespace
}  // namespace stoker
