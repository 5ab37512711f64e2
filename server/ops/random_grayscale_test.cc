// random_grayscale: rgb_to_grayscale with probability p, per sample.
#include "gtest/gtest.h"
#include "server/pipeline/op_testing.h"
#include "server/ops/pixels.h"

namespace stoker {
namespace {

std::string Spec(const std::string& gray, int channels = 3) {
  return ImageOpSpec(16, 24, channels, R"("random_grayscale": )" + gray);
}

TEST(RandomGrayscaleTest, GraysAboutPOfTheSamplesAsTorchvision) {
  auto p = CompileJson(Spec(R"({"probability": 0.3})"));
  ASSERT_TRUE(p.ok()) << p.status();
  const std::vector<uint8_t> px = PhotoLike(24, 16, 3, 7);
  int grayed = 0;
  for (uint64_t index = 0; index < 1000; ++index) {
    const std::vector<uint8_t> out = RunPixels(*p, 0, px, 5, 1, index);
    if (out == px) continue;
    ++grayed;
    for (size_t i = 0; i < px.size(); i += 3) {
      for (int k = 0; k < 3; ++k) ASSERT_EQ(out[i + k], Luma(&px[i]));
    }
  }
  EXPECT_GT(grayed, 250);  // Binomial(1000, 0.3): 300 +- 14.5 sd.
  EXPECT_LT(grayed, 350);
  // The default is torchvision's 0.1.
  auto d = CompileJson(Spec("{}"));
  ASSERT_TRUE(d.ok());
  int by_default = 0;
  for (uint64_t index = 0; index < 1000; ++index) {
    by_default += !EffectsOf(*d, 0, 5, 1, index).empty();
  }
  EXPECT_GT(by_default, 60);
  EXPECT_LT(by_default, 140);
}

TEST(RandomGrayscaleTest, AlphaAndGrayPicturesAreKept) {
  auto rgba = CompileJson(Spec(R"({"probability": 1})", 4));
  ASSERT_TRUE(rgba.ok());
  const std::vector<uint8_t> px = PhotoLike(24, 16, 4, 8);
  const std::vector<uint8_t> out = RunPixels(*rgba, 0, px, 1, 0, 0);
  for (size_t i = 0; i < px.size(); i += 4) {
    ASSERT_EQ(out[i], Luma(&px[i]));
    ASSERT_EQ(out[i + 3], px[i + 3]);
  }
  auto gray = CompileJson(Spec(R"({"probability": 1})", 1));
  ASSERT_TRUE(gray.ok());
  const std::vector<uint8_t> g = PhotoLike(24, 16, 1, 9);
  EXPECT_EQ(RunPixels(*gray, 0, g, 1, 0, 0), g);
  EXPECT_EQ(CompileJson(Spec(R"({"probability": 1.5})")).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stoker
