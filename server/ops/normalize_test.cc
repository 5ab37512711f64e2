// normalize: images' (x / 255 - mean) / std on the 0..1 scale, folded into
// the field's conversion; arrays' (x - mean) / std on their own values.
#include "gtest/gtest.h"
#include "server/pipeline/op_testing.h"

namespace stoker {
namespace {

std::string ImageSpec(const std::string& normalize) {
  return R"({"fields": [{"name": "image", "kind": "KIND_IMAGE", "dtype": "DTYPE_FLOAT32",
             "shape": [8, 8, 3]}],
             "pipeline": [{"center_crop": {"width": 8, "height": 8}},
                          {"normalize": )" + normalize + "}]}";
}

TEST(NormalizeTest, ImagesAreNormalizedOnTheZeroToOneScale) {
  auto p = CompileJson(ImageSpec(R"({"mean": [0.485, 0.456, 0.406],
                                     "std": [0.229, 0.224, 0.225]})"));
  ASSERT_TRUE(p.ok()) << p.status();
  const Normalization& n = p->fields()[0].norm;
  const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
  for (int c = 0; c < 3; ++c) {
    // Pixel 255 of channel c comes out as (1 - mean) / std.
    EXPECT_NEAR(255 * n.scale[c] + n.offset[c], (1 - mean[c]) / std[c], 1e-5) << c;
    EXPECT_NEAR(n.offset[c], -mean[c] / std[c], 1e-6) << c;
  }
  // One value serves every channel; 0.5/0.5 maps pixels onto -1..1.
  auto half = CompileJson(ImageSpec(R"({"mean": [0.5], "std": [0.5]})"));
  ASSERT_TRUE(half.ok()) << half.status();
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(half->fields()[0].norm.offset[c], -1.0f, 1e-6);
    EXPECT_NEAR(255 * half->fields()[0].norm.scale[c] + half->fields()[0].norm.offset[c], 1.0f,
                1e-6);
  }
}

TEST(NormalizeTest, ValuesOnTheWrongScaleNameTheScale) {
  auto wrong = CompileJson(ImageSpec(R"({"mean": [123.7, 116.3, 103.5],
                                         "std": [58.4, 57.1, 57.4]})"));
  ASSERT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("on the 0..1 scale of pixels / 255"),
            std::string::npos) << wrong.status();
  EXPECT_NE(wrong.status().message().find("(123.7 -> 0.485"), std::string::npos)
      << wrong.status();
  // A std alone on the wrong scale, or a negative mean, is refused as well,
  // each with its own advice.
  auto std_only = CompileJson(ImageSpec(R"({"mean": [0.5], "std": [58.4]})"));
  EXPECT_NE(std_only.status().message().find("(58.4 -> 0.229"), std::string::npos)
      << std_only.status();
  auto negative = CompileJson(ImageSpec(R"({"mean": [-0.1], "std": [0.5]})"));
  EXPECT_NE(negative.status().message().find("a mean is a level within 0..1"),
            std::string::npos) << negative.status();
  EXPECT_FALSE(CompileJson(ImageSpec(R"({"mean": [0.5], "std": [0]})")).ok());
  EXPECT_TRUE(CompileJson(ImageSpec(R"({"mean": [0, 1, 0.5], "std": [1, 1, 1]})")).ok());
  // The presets take the same rule.
  EXPECT_EQ(CompileJson(R"({"transform": "TRANSFORM_VAL", "dtype": "DTYPE_FLOAT32",
                            "mean": [123.7, 116.3, 103.5], "std": [58.4, 57.1, 57.4]})")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(NormalizeTest, ArraysTakeValuesOnTheirOwnScale) {
  auto p = CompileJson(R"({"fields": [{"name": "ct", "kind": "KIND_ARRAY",
                                       "dtype": "DTYPE_FLOAT32", "shape": [4]}],
                           "pipeline": [{"normalize": {"mean": [-1000], "std": [400]}}]})");
  ASSERT_TRUE(p.ok()) << p.status();
  const std::vector<float> out = RunArray<float>(*p, 0, {-1000, -600, 0, 1000}, 1, 0, 0);
  EXPECT_EQ(out, (std::vector<float>{0, 1, 2.5, 5}));
  EXPECT_FALSE(CompileJson(R"({"fields": [{"name": "ct", "kind": "KIND_ARRAY",
                                           "dtype": "DTYPE_FLOAT32", "shape": [4]}],
                               "pipeline": [{"normalize": {"mean": [0, 1], "std": [1]}}]})")
                   .ok());
}

}  // namespace
}  // namespace stoker
