// Each decode lever (full, crop, DCT scale + crop) against the
// straightforward reference (full TurboJPEG decode, floating-point 2-D
// resample) for every JPEG variant, on val and train geometry.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "server/imaging/decode.h"
#include "server/imaging/jpeg.h"
#include "server/imaging/transform.h"
#include "tests/reference.h"
#include "tests/testdata.h"
#include "util/rng.h"

namespace stoker {
namespace {

using testdata::Subsampling;

struct Variant {
  const char* name;
  Subsampling sub;
  bool progressive;
};

const Variant kVariants[] = {
    {"444", Subsampling::k444, false}, {"422", Subsampling::k422, false},
    {"420", Subsampling::k420, false}, {"gray", Subsampling::kGray, false},
    {"420-progressive", Subsampling::k420, true},
};

enum class Lever { kFull, kCrop, kScaleCrop };

// Runs the production path for one sample: plan, decode, resample.
std::vector<uint8_t> Produce(const std::string& jpeg, const CropBox& box,
                             int size, Lever lever) {
  DecodedRegion region;
  CropBox b;
  absl::Status s = DecodeForCrop(
      ThreadLocalDecoder(), reinterpret_cast<const uint8_t*>(jpeg.data()),
      jpeg.size(), [&](int, int) { return box; }, size,
      lever == Lever::kScaleCrop, lever != Lever::kFull, &region, &b);
  EXPECT_TRUE(s.ok()) << s;
  std::vector<uint8_t> out(static_cast<size_t>(size) * size * 3);
  ResizeBox(region.image.pixels.data(), region.image.width,
            region.image.height, b, size, size, out.data());
  return out;
}

double Psnr(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  double mse = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double d = double(a[i]) - b[i];
    mse += d * d;
  }
  mse /= a.size();
  return mse == 0 ? 99.0 : 10 * std::log10(255.0 * 255.0 / mse);
}

TEST(DecodeLeverTest, EveryLeverAndVariantAgreesWithTheReference) {
  const int w = 500, h = 375, size = 112;
  auto rgb = testdata::PhotoLikeRgb(w, h, 77);
  double worst_mean[3] = {0, 0, 0}, worst_psnr[3] = {99, 99, 99};
  for (const Variant& v : kVariants) {
    auto jpeg = testdata::EncodeJpeg(rgb, w, h, 90, v.sub, v.progressive);
    ASSERT_TRUE(jpeg.ok());
    const std::string path = testdata::MakeTempDir("lever") + "/x.jpg";
    ASSERT_TRUE(testdata::WriteFile(path, *jpeg).ok());
    auto ref_img = reference::DecodeFile(path);
    ASSERT_TRUE(ref_img.ok());
    for (uint64_t seed = 0; seed < 6; ++seed) {
      Rng rng(seed);
      const CropBox box = seed == 0 ? CenterCropBox(w, h, size)
                                    : RandomResizedCropBox(w, h, rng);
      reference::Image ref = reference::ResampleRegion(
          *ref_img, box.x, box.y, box.w, box.h, size, size, box.flip);
      for (Lever lever : {Lever::kFull, Lever::kCrop, Lever::kScaleCrop}) {
        std::vector<uint8_t> out = Produce(*jpeg, box, size, lever);
        auto d = reference::Compare(out.data(), ref.rgb.data(), out.size());
        const double psnr = Psnr(out, ref.rgb);
        const int l = static_cast<int>(lever);
        worst_mean[l] = std::max(worst_mean[l], d.mean_abs);
        worst_psnr[l] = std::min(worst_psnr[l], psnr);
        SCOPED_TRACE(::testing::Message()
                     << v.name << " seed " << seed << " lever "
                     << static_cast<int>(lever) << ": mean " << d.mean_abs
                     << " max " << d.max_abs << " psnr " << psnr);
        if (lever == Lever::kScaleCrop) {
          // A smaller IDCT is a different low-pass filter than decode +
          // antialiased resize: close, not identical.
          EXPECT_LT(d.mean_abs, 4.0);
          EXPECT_GT(psnr, 32.0);
        } else {
          EXPECT_LE(d.max_abs, 2);
          EXPECT_LT(d.mean_abs, 0.6);
        }
      }
    }
  }
  // The figures the README quotes.
  const char* names[] = {"full", "crop", "scale+crop"};
  for (int l = 0; l < 3; ++l) {
    std::printf("lever %-10s worst mean |diff| %.3f, worst PSNR %.1f dB\n",
                names[l], worst_mean[l], worst_psnr[l]);
  }
}

TEST(DecodeLeverTest, CropDecodesOnlyTheRegionAndScaleShrinksIt) {
  const int w = 640, h = 480;
  auto jpeg = testdata::EncodeJpeg(testdata::PhotoLikeRgb(w, h, 5), w, h, 90);
  ASSERT_TRUE(jpeg.ok());
  CropBox box{300, 200, 200, 150, false};
  DecodePlan full = PlanDecode(w, h, box, 64, false, false);
  EXPECT_EQ(full.eighths, 8);
  EXPECT_EQ(full.need.x1 - full.need.x0, w);
  DecodePlan crop = PlanDecode(w, h, box, 64, false, true);
  EXPECT_EQ(crop.eighths, 8);
  EXPECT_LE(crop.need.x1 - crop.need.x0, 210);  // 200 + filter reach.
  EXPECT_LE(crop.need.y1 - crop.need.y0, 160);
  // 150 px tall crop for 64 px output: 2/8 keeps 37 < 64, so 4/8.
  DecodePlan scaled = PlanDecode(w, h, box, 64, true, true);
  EXPECT_EQ(scaled.eighths, 4);
  EXPECT_NEAR(scaled.box.w, 100, 1e-9);
  DecodedRegion r;
  ASSERT_TRUE(ThreadLocalDecoder()
                  .Decode(reinterpret_cast<const uint8_t*>(jpeg->data()),
                          jpeg->size(),
                          [&](int, int) {
                            return RegionRequest{scaled.eighths, scaled.need, true};
                          },
                          &r)
                  .ok());
  EXPECT_EQ(r.scaled_width, 320);
  EXPECT_EQ(r.scaled_height, 240);
  EXPECT_LE(r.x, scaled.need.x0);  // Columns start at an iMCU boundary.
  EXPECT_GE(r.x + r.image.width, scaled.need.x1);
  EXPECT_EQ(r.y, scaled.need.y0);
  EXPECT_EQ(r.image.height, scaled.need.y1 - scaled.need.y0);
  EXPECT_LT(r.image.width, 320);
}

TEST(DecodeLeverTest, CmykJpegComesOutAsRgb) {
  const int w = 96, h = 64;
  auto rgb = testdata::PhotoLikeRgb(w, h, 9);
  auto jpeg = testdata::EncodeCmykJpeg(rgb, w, h, 95);
  ASSERT_TRUE(jpeg.ok()) << jpeg.status();
  RgbImage img;
  ASSERT_TRUE(ThreadLocalDecoder()
                  .Decode(reinterpret_cast<const uint8_t*>(jpeg->data()),
                          jpeg->size(), &img)
                  .ok());
  ASSERT_EQ(img.width, w);
  auto d = reference::Compare(img.pixels.data(), rgb.data(), rgb.size());
  EXPECT_LT(d.mean_abs, 6.0) << "max " << d.max_abs;
}

}  // namespace
}  // namespace stoker
