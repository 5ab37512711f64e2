// random_crop: a window drawn per sample, pixels copied as they are;
// a smaller picture padded.
#include <set>
#include <utility>

#include "gtest/gtest.h"
#include "server/pipeline/op_testing.h"

namespace stoker {
namespace {

std::string Spec(int size) {
  const std::string s = std::to_string(size);
  return R"({"fields": [{"name": "image", "kind": "KIND_IMAGE", "shape": [)" + s + ", " + s +
         R"(, 3]}], "pipeline": [{"random_crop": {"width": )" + s + R"(, "height": )" + s +
         "}}]}";
}

TEST(RandomCropTest, EachSampleAWholeWindowOfThePicture) {
  const std::vector<uint8_t> px = Coordinates(30, 20);
  auto p = CompileJson(Spec(8));
  ASSERT_TRUE(p.ok()) << p.status();
  std::set<std::pair<int, int>> corners;
  for (uint64_t index = 0; index < 300; ++index) {
    const std::vector<uint8_t> out = Render(*p, 0, px, 30, 20, 3, 4, 1, index);
    const int left = out[0], top = out[1];
    ASSERT_LE(left, 30 - 8);
    ASSERT_LE(top, 20 - 8);
    for (int y = 0; y < 8; ++y) {
      for (int x = 0; x < 8; ++x) {
        ASSERT_EQ(out[(y * 8 + x) * 3], left + x);
        ASSERT_EQ(out[(y * 8 + x) * 3 + 1], top + y);
      }
    }
    corners.insert({left, top});
    // The draw is a function of (seed, epoch, index).
    ASSERT_EQ(Render(*p, 0, px, 30, 20, 3, 4, 1, index), out);
  }
  // 23 x 13 = 299 windows; 300 draws reach many of them, corners included.
  EXPECT_GT(corners.size(), 150u);
}

TEST(RandomCropTest, ASmallerPictureIsPadded) {
  const std::vector<uint8_t> px(4 * 4 * 3, 90);
  auto p = CompileJson(Spec(8));
  ASSERT_TRUE(p.ok());
  const std::vector<uint8_t> out = Render(*p, 0, px, 4, 4, 3, 0, 0, 0);
  int kept = 0, padded = 0;
  for (size_t i = 0; i < out.size(); i += 3) {
    ASSERT_TRUE(out[i] == 90 || out[i] == 0) << i;
    (out[i] == 90 ? kept : padded) += 1;
  }
  EXPECT_EQ(kept, 16);  // All of the picture, in the 8 x 8 window.
  EXPECT_EQ(padded, 48);
}

}  // namespace
}  // namespace stoker
