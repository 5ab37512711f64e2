#include "server/imaging/transform.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "server/imaging/jpeg.h"
#include "tests/reference.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

using testdata::Subsampling;

RgbImage DecodeOrDie(const std::string& jpeg) {
  RgbImage img;
  absl::Status s = ThreadLocalDecoder().Decode(
      reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), &img);
  EXPECT_TRUE(s.ok()) << s;
  return img;
}

reference::Image AsRef(const RgbImage& img) {
  return reference::Image{img.width, img.height, img.pixels};
}

TEST(JpegTest, DecodesEveryVariantCloseToTheSource) {
  const int w = 123, h = 77;  // Odd sizes exercise partial MCUs.
  auto rgb = testdata::PhotoLikeRgb(w, h, 3);
  for (Subsampling sub : {Subsampling::k444, Subsampling::k422,
                          Subsampling::k420, Subsampling::kGray}) {
    for (bool progressive : {false, true}) {
      auto jpeg = testdata::EncodeJpeg(rgb, w, h, 95, sub, progressive);
      ASSERT_TRUE(jpeg.ok());
      RgbImage img = DecodeOrDie(*jpeg);
      ASSERT_EQ(img.width, w);
      ASSERT_EQ(img.height, h);
      if (sub == Subsampling::kGray) {
        for (size_t i = 0; i < img.pixels.size(); i += 3) {
          ASSERT_EQ(img.pixels[i], img.pixels[i + 1]);
          ASSERT_EQ(img.pixels[i], img.pixels[i + 2]);
        }
      } else {
        auto d = reference::Compare(img.pixels.data(), rgb.data(), rgb.size());
        // Grain in the chroma planes is what subsampling drops.
        EXPECT_LT(d.mean_abs, sub == Subsampling::k444 ? 4.0 : 12.0)
            << "subsampling " << static_cast<int>(sub);
      }
    }
  }
}

TEST(JpegTest, BadInputsAreErrorsWithCodes) {
  RgbImage img;
  JpegDecoder& d = ThreadLocalDecoder();
  EXPECT_EQ(d.Decode(nullptr, 0, &img).code(), absl::StatusCode::kInvalidArgument);
  std::string garbage(1000, 'x');
  auto s = d.Decode(reinterpret_cast<const uint8_t*>(garbage.data()),
                    garbage.size(), &img);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  auto jpeg = testdata::EncodeJpeg(testdata::PhotoLikeRgb(64, 64, 1), 64, 64, 90);
  ASSERT_TRUE(jpeg.ok());
  std::string truncated = jpeg->substr(0, jpeg->size() / 2);
  s = d.Decode(reinterpret_cast<const uint8_t*>(truncated.data()),
               truncated.size(), &img);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  // The decoder is still usable after errors.
  EXPECT_TRUE(d.Decode(reinterpret_cast<const uint8_t*>(jpeg->data()),
                       jpeg->size(), &img).ok());
}

TEST(TransformTest, CenterCropBoxMatchesTorchvisionGeometry) {
  // 500x375 at S=224: Resize(256) gives 341x256 (int(256*500/375)), then
  // CenterCrop(224) keeps left=round(58.5)=58 (half to even), top=16.
  CropBox b = CenterCropBox(500, 375, 224);
  EXPECT_NEAR(b.x, 58 * 500.0 / 341, 1e-9);
  EXPECT_NEAR(b.y, 16 * 375.0 / 256, 1e-9);
  EXPECT_NEAR(b.w, 224 * 500.0 / 341, 1e-9);
  EXPECT_NEAR(b.h, 224 * 375.0 / 256, 1e-9);
  EXPECT_FALSE(b.flip);
  CropBox t = CenterCropBox(300, 600, 100);  // Portrait; resize = 114.
  EXPECT_NEAR(t.w, 100 * 300.0 / 114, 1e-9);
  EXPECT_NEAR(t.y, 64 * 600.0 / 228, 1e-9);  // rh = 228, top = 64.
  EXPECT_NEAR(t.x, 7 * 300.0 / 114, 1e-9);   // left = round(7.0).
}

TEST(TransformTest, RandomResizedCropStaysInsideAndFollowsRanges) {
  int flips = 0;
  double min_area = 1, max_area = 0;
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    Rng rng(seed);
    CropBox b = RandomResizedCropBox(500, 375, rng);
    ASSERT_GE(b.x, 0);
    ASSERT_GE(b.y, 0);
    ASSERT_LE(b.x + b.w, 500);
    ASSERT_LE(b.y + b.h, 375);
    ASSERT_EQ(b.w, std::floor(b.w));  // Integer boxes, as torchvision.
    double area = b.w * b.h / (500.0 * 375.0);
    min_area = std::min(min_area, area);
    max_area = std::max(max_area, area);
    double ratio = b.w / b.h;
    ASSERT_GT(ratio, 0.70);
    ASSERT_LT(ratio, 1.40);
    flips += b.flip;
  }
  EXPECT_LT(min_area, 0.1);
  EXPECT_GT(max_area, 0.9);
  EXPECT_NEAR(flips, 1000, 120);
  // Same seed, same box.
  Rng a(77), b(77);
  CropBox x = RandomResizedCropBox(640, 480, a), y = RandomResizedCropBox(640, 480, b);
  EXPECT_EQ(x.x, y.x);
  EXPECT_EQ(x.w, y.w);
  EXPECT_EQ(x.flip, y.flip);
}

TEST(TransformTest, RandomResizedCropFallsBackToClampedCenter) {
  // A 1000x10 strip: no draw fits, so the fallback crops the centre with
  // the widest allowed ratio: h = 10, w = round(10 * 4/3) = 13.
  Rng rng(1);
  CropBox b = RandomResizedCropBox(1000, 10, rng);
  EXPECT_EQ(b.h, 10);
  EXPECT_EQ(b.w, 13);
  EXPECT_EQ(b.x, (1000 - 13) / 2);
  EXPECT_EQ(b.y, 0);
}

TEST(TransformTest, ResizeMatchesFloatReference) {
  auto jpeg = testdata::EncodeJpeg(testdata::PhotoLikeRgb(480, 360, 11), 480,
                                   360, 90);
  ASSERT_TRUE(jpeg.ok());
  RgbImage img = DecodeOrDie(*jpeg);
  struct Case { CropBox box; int out; };
  const Case cases[] = {
      {CenterCropBox(480, 360, 224), 224},              // Downscale.
      {CropBox{10, 20, 100, 80, false}, 224},            // Upscale.
      {CropBox{200.5, 100.25, 250, 200, true}, 64},      // Flip, fractional.
      {CropBox{0, 0, 480, 360, false}, 32},              // Strong downscale.
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> out(static_cast<size_t>(c.out) * c.out * 3);
    ResizeBox(img.pixels.data(), img.width, img.height, c.box, c.out, c.out,
              out.data());
    reference::Image ref = reference::ResampleRegion(
        AsRef(img), c.box.x, c.box.y, c.box.w, c.box.h, c.out, c.out, c.box.flip);
    auto d = reference::Compare(out.data(), ref.rgb.data(), out.size());
    EXPECT_LE(d.max_abs, 2) << "box " << c.box.x << "," << c.box.y;
    EXPECT_LT(d.mean_abs, 0.6);
  }
}

TEST(TransformTest, ValBoxEqualsResizeThenCrop) {
  auto jpeg = testdata::EncodeJpeg(testdata::PhotoLikeRgb(500, 375, 12), 500,
                                   375, 90);
  RgbImage img = DecodeOrDie(*jpeg);
  std::vector<uint8_t> out(224 * 224 * 3);
  ResizeBox(img.pixels.data(), img.width, img.height,
            CenterCropBox(500, 375, 224), 224, 224, out.data());
  reference::Image ref = reference::ValTransform(AsRef(img), 224);
  auto d = reference::Compare(out.data(), ref.rgb.data(), out.size());
  EXPECT_LE(d.max_abs, 2);
  EXPECT_LT(d.mean_abs, 0.6);
}

TEST(TransformTest, FlipMirrorsExactly) {
  auto rgb = testdata::PhotoLikeRgb(90, 70, 4);
  CropBox box{5, 5, 60, 50, false};
  std::vector<uint8_t> a(40 * 30 * 3), b(40 * 30 * 3);
  ResizeBox(rgb.data(), 90, 70, box, 40, 30, a.data());
  box.flip = true;
  ResizeBox(rgb.data(), 90, 70, box, 40, 30, b.data());
  for (int y = 0; y < 30; ++y)
    for (int x = 0; x < 40; ++x)
      for (int c = 0; c < 3; ++c)
        ASSERT_EQ(a[(y * 40 + x) * 3 + c], b[(y * 40 + 39 - x) * 3 + c]);
}

}  // namespace
}  // namespace stoker

namespace stoker {
namespace {

TEST(NormalizeTest, WritesChwPlanesWithMeanAndStd) {
  const uint8_t hwc[2 * 2 * 3] = {0, 10, 20, 30, 40, 50, 60, 70, 80, 255, 128, 1};
  Normalization n;
  for (int c = 0; c < 3; ++c) {
    n.scale[c] = 1.0f / (255.0f * (0.2f + 0.1f * c));
    n.offset[c] = -(0.4f + 0.05f * c) / (0.2f + 0.1f * c);
  }
  float out[12];
  WriteNormalized(hwc, 4, 3, n, /*chw=*/true, ElemType::kFloat32, out);
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 4; ++i) {
      const float want = (hwc[i * 3 + c] / 255.0f - (0.4f + 0.05f * c)) / (0.2f + 0.1f * c);
      EXPECT_NEAR(out[c * 4 + i], want, 1e-5) << "c " << c << " i " << i;
    }
  }
  uint16_t half[12], bf16[12];
  WriteNormalized(hwc, 4, 3, n, /*chw=*/true, ElemType::kFloat16, half);
  WriteNormalized(hwc, 4, 3, n, /*chw=*/true, ElemType::kBfloat16, bf16);
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(half[i], FloatToHalf(out[i]));
    EXPECT_EQ(bf16[i], FloatToBfloat16(out[i]));
  }
  // Interleaved, past one block of the 16-bit path: the same values.
  std::vector<uint8_t> big(3000 * 3);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7);
  std::vector<float> f32(big.size());
  std::vector<uint16_t> f16(big.size());
  WriteNormalized(big.data(), 3000, 3, n, /*chw=*/false, ElemType::kFloat32, f32.data());
  WriteNormalized(big.data(), 3000, 3, n, /*chw=*/false, ElemType::kFloat16, f16.data());
  for (size_t i = 0; i < big.size(); ++i) ASSERT_EQ(f16[i], FloatToHalf(f32[i])) << i;
  WriteNormalized(big.data(), 3000, 3, n, /*chw=*/true, ElemType::kFloat32, f32.data());
  WriteNormalized(big.data(), 3000, 3, n, /*chw=*/true, ElemType::kBfloat16, f16.data());
  for (size_t i = 0; i < big.size(); ++i) ASSERT_EQ(f16[i], FloatToBfloat16(f32[i])) << i;
}

// A plain crop is copied instead of filtered: the filters are the identity
// there, so the copy must equal them bit for bit, mirrored or not.
TEST(ResampleTest, PlainCropsEqualTheFiltersOutput) {
  const int w = 37, h = 29;
  std::vector<uint8_t> src(w * h * 3);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + (i >> 3));
  for (bool flip : {false, true}) {
    const CropBox box{5, 3, 20, 17, flip};
    std::vector<uint8_t> copied(20 * 17 * 3), filtered(20 * 17 * 3), bicubic(20 * 17 * 3);
    Resample(src.data(), w, h, 3, 1, box, 20, 17, Filter::kBilinear, copied.data());
    ResizeBox(src.data(), w, h, box, 20, 17, filtered.data());
    EXPECT_EQ(copied, filtered) << "flip " << flip;
    // Off by a fraction of a pixel: filtered, not copied.
    Resample(src.data(), w, h, 3, 1, CropBox{5.5, 3, 20, 17, flip}, 20, 17,
             Filter::kBilinear, bicubic.data());
    EXPECT_NE(bicubic, filtered);
  }
}

}  // namespace
}  // namespace stoker
