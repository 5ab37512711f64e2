// flip: a horizontal (or vertical) mirror with probability p, per sample.
#include "gtest/gtest.h"
#include "server/pipeline/op_testing.h"

namespace stoker {
namespace {

std::string Spec(const std::string& flip) {
  return ImageOpSpec(12, 20, 3, R"("flip": )" + flip);
}

TEST(FlipTest, MirrorsExactlyWithItsProbability) {
  const std::vector<uint8_t> px = Coordinates(20, 12);
  for (bool vertical : {false, true}) {
    auto p = CompileJson(Spec(vertical ? R"({"probability": 1, "vertical": true})"
                                       : R"({"probability": 1})"));
    ASSERT_TRUE(p.ok()) << p.status();
    const std::vector<uint8_t> out = Render(*p, 0, px, 20, 12, 3, 1, 0, 7);
    for (int y = 0; y < 12; ++y) {
      for (int x = 0; x < 20; ++x) {
        const uint8_t* o = &out[(y * 20 + x) * 3];
        ASSERT_EQ(o[0], vertical ? x : 19 - x) << x << "," << y;
        ASSERT_EQ(o[1], vertical ? 11 - y : y) << x << "," << y;
      }
    }
  }
  // The default is torchvision's 0.5; 0 never flips.
  auto half = CompileJson(Spec("{}"));
  auto never = CompileJson(Spec(R"({"probability": 0})"));
  ASSERT_TRUE(half.ok() && never.ok());
  int flipped = 0;
  for (uint64_t index = 0; index < 400; ++index) {
    flipped += Render(*half, 0, px, 20, 12, 3, 3, 0, index) != px;
    ASSERT_EQ(Render(*never, 0, px, 20, 12, 3, 3, 0, index), px);
  }
  EXPECT_GT(flipped, 150);  // Binomial(400, 0.5): 200 +- 10 sd.
  EXPECT_LT(flipped, 250);
  EXPECT_EQ(CompileJson(Spec(R"({"probability": 1.5})")).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stoker
