// What is handed to a trainer's decoder and to a hardware JPEG engine, for
// each kind of file the daemon meets, read from the file itself.
#include "server/imaging/jpeg_handover.h"

#include <jpeglib.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

constexpr int kW = 96, kH = 64;

// Photo-like RGB through libjpeg with `tweak` applied to its settings.
std::string Encode(const std::function<void(jpeg_compress_struct*)>& tweak) {
  const std::vector<uint8_t> rgb = testdata::PhotoLikeRgb(kW, kH, 3);
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* out = nullptr;
  unsigned long size = 0;  // NOLINT(runtime/int): libjpeg's type.
  jpeg_mem_dest(&c, &out, &size);
  c.image_width = kW;
  c.image_height = kH;
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  tweak(&c);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(&rgb[size_t{c.next_scanline} * kW * 3]);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::string jpeg(reinterpret_cast<char*>(out), size);
  free(out);
  return jpeg;
}

std::string Sampled(int luma_h, int luma_v, int cb_h = 1, int cb_v = 1) {
  return Encode([=](jpeg_compress_struct* c) {
    c->comp_info[0].h_samp_factor = luma_h;
    c->comp_info[0].v_samp_factor = luma_v;
    c->comp_info[1].h_samp_factor = cb_h;
    c->comp_info[1].v_samp_factor = cb_v;
  });
}

struct Verdicts {
  Kept client, hardware;
};

Verdicts Judge(const std::string& file, uint64_t max_bytes = 1 << 20,
               uint64_t max_pixels = 1 << 20) {
  const auto* data = reinterpret_cast<const uint8_t*>(file.data());
  Verdicts v;
  Kept* out[] = {&v.client, &v.hardware};
  for (bool hardware : {false, true}) {
    const HandOverRule rule{max_bytes, max_pixels, hardware};
    Kept kept = KeptByBytes(data, file.size(), rule);
    if (kept == Kept::kHandedOver) {
      JpegInfo info;
      EXPECT_TRUE(JpegDecoder().ReadInfo(data, file.size(), &info).ok());
      kept = KeptByHeader(info, rule);
    }
    *out[hardware] = kept;
  }
  return v;
}

void ExpectKept(const std::string& file, Kept client, Kept hardware) {
  const Verdicts v = Judge(file);
  EXPECT_EQ(KeptName(v.client), std::string(KeptName(client)));
  EXPECT_EQ(KeptName(v.hardware), std::string(KeptName(hardware)));
}

TEST(JpegHandOverTest, BaselineYccAtEverySamplingGoesToBoth) {
  for (auto [h, v] : {std::pair{1, 1}, {2, 1}, {2, 2}, {1, 2}, {4, 1}}) {
    SCOPED_TRACE(std::to_string(h) + "x" + std::to_string(v));
    ExpectKept(Sampled(h, v), Kept::kHandedOver, Kept::kHandedOver);
  }
  auto gray = testdata::EncodeJpeg(testdata::PhotoLikeRgb(kW, kH, 3), kW, kH, 90,
                                   testdata::Subsampling::kGray);
  ASSERT_TRUE(gray.ok());
  ExpectKept(*gray, Kept::kHandedOver, Kept::kHandedOver);
}

TEST(JpegHandOverTest, ProgressiveAndArithmeticStayOffTheEngine) {
  ExpectKept(Encode([](jpeg_compress_struct* c) { jpeg_simple_progression(c); }),
             Kept::kHandedOver, Kept::kCoding);
  ExpectKept(Encode([](jpeg_compress_struct* c) { c->arith_code = TRUE; }),
             Kept::kHandedOver, Kept::kCoding);
}

TEST(JpegHandOverTest, ColorCodedOtherwiseStays) {
  auto cmyk = testdata::EncodeCmykJpeg(testdata::PhotoLikeRgb(kW, kH, 3), kW, kH, 90);
  ASSERT_TRUE(cmyk.ok());
  ExpectKept(*cmyk, Kept::kColor, Kept::kColor);
  // RGB stored as RGB: the client's libjpeg reads it, an engine would
  // convert it as YCbCr.
  ExpectKept(Encode([](jpeg_compress_struct* c) { jpeg_set_colorspace(c, JCS_RGB); }),
             Kept::kHandedOver, Kept::kColor);
}

TEST(JpegHandOverTest, UnusualChromaSamplingStaysOffTheEngine) {
  ExpectKept(Sampled(2, 2, 2, 1), Kept::kHandedOver, Kept::kSampling);
}

TEST(JpegHandOverTest, LimitsCutShortAndOtherFormatsStay) {
  const std::string jpeg = Sampled(2, 2);
  const Verdicts bytes = Judge(jpeg, jpeg.size() - 1);
  EXPECT_EQ(bytes.client, Kept::kBytes);
  EXPECT_EQ(bytes.hardware, Kept::kBytes);
  EXPECT_EQ(Judge(jpeg, jpeg.size()).client, Kept::kHandedOver);
  const Verdicts pixels = Judge(jpeg, 1 << 20, kW * kH - 1);
  EXPECT_EQ(pixels.client, Kept::kPixels);
  EXPECT_EQ(pixels.hardware, Kept::kPixels);
  EXPECT_EQ(Judge(jpeg, 1 << 20, kW * kH).hardware, Kept::kHandedOver);
  ExpectKept(jpeg.substr(0, jpeg.size() - 200), Kept::kCutShort, Kept::kCutShort);
  auto png = testdata::EncodePng(testdata::PhotoLikeRgb(kW, kH, 3), kW, kH,
                                 testdata::PngKind::kRgb8);
  ASSERT_TRUE(png.ok());
  ExpectKept(*png, Kept::kNotJpeg, Kept::kNotJpeg);
  ExpectKept("", Kept::kNotJpeg, Kept::kNotJpeg);
}

}  // namespace
}  // namespace stoker
