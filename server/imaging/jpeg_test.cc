// The decoder's guarantees against hostile files: limits checked from the
// header before allocation, a progressive scan limit, and no state carried
// from one image to the next.
#include "server/imaging/jpeg.h"

#include <sys/resource.h>

#include <string>

#include "gtest/gtest.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

std::string Photo(int w, int h, uint64_t seed, int quality, bool progressive) {
  auto jpeg = testdata::EncodeJpeg(testdata::PhotoLikeRgb(w, h, seed), w, h,
                                   quality, testdata::Subsampling::k420,
                                   progressive);
  EXPECT_TRUE(jpeg.ok());
  return *jpeg;
}

// Offset of the first marker 0xFF `code` (markers are not escaped in
// headers; scans come after the markers we patch).
size_t Marker(const std::string& jpeg, uint8_t code) {
  for (size_t i = 2; i + 1 < jpeg.size(); ++i) {
    if (static_cast<uint8_t>(jpeg[i]) == 0xFF &&
        static_cast<uint8_t>(jpeg[i + 1]) == code) {
      return i;
    }
  }
  ADD_FAILURE() << "no marker " << int{code};
  return 0;
}

// The frame header claims width x height; the data stays small.
std::string ClaimSize(std::string jpeg, int width, int height) {
  size_t sof = Marker(jpeg, 0xC2);  // Progressive frame.
  jpeg[sof + 5] = static_cast<char>(height >> 8);
  jpeg[sof + 6] = static_cast<char>(height & 0xFF);
  jpeg[sof + 7] = static_cast<char>(width >> 8);
  jpeg[sof + 8] = static_cast<char>(width & 0xFF);
  return jpeg;
}

long MaxRssKb() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

absl::Status DecodeWith(const std::string& jpeg, const DecodeLimits& limits,
                        RgbImage* out) {
  JpegDecoder d;
  d.set_limits(limits);
  return d.Decode(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), out);
}

TEST(JpegLimits, HugeDeclaredProgressiveIsRejectedFromTheHeader) {
  const std::string bomb = ClaimSize(Photo(256, 256, 1, 90, true), 16384, 16384);
  ASSERT_LT(bomb.size(), 256u * 1024);
  const long before = MaxRssKb();
  RgbImage out;
  absl::Status s = DecodeWith(bomb, DecodeLimits(), &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("16384x16384"), std::string::npos) << s;
  EXPECT_NE(s.message().find("over the limit of 100000000"), std::string::npos) << s;
  // With the pixel limit raised, the memory estimate still stops it.
  DecodeLimits loose;
  loose.max_pixels = int64_t{1} << 30;
  s = DecodeWith(bomb, loose, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("(progressive) needs about"), std::string::npos) << s;
  // Nothing of the claimed 16384^2 image was allocated.
  EXPECT_LT(MaxRssKb() - before, 100 * 1024);
}

TEST(JpegLimits, ProgressiveFileWithThousandsOfScansIsStopped) {
  std::string jpeg = Photo(64, 64, 2, 90, true);
  // Repeat the last scan (SOS ... up to EOI) 5,000 times.
  size_t last_sos = 0;
  for (size_t i = 2; i + 1 < jpeg.size(); ++i) {
    if (static_cast<uint8_t>(jpeg[i]) == 0xFF &&
        static_cast<uint8_t>(jpeg[i + 1]) == 0xDA) {
      last_sos = i;
    }
  }
  const size_t eoi = jpeg.size() - 2;
  const std::string scan = jpeg.substr(last_sos, eoi - last_sos);
  std::string many = jpeg.substr(0, eoi);
  for (int i = 0; i < 5000; ++i) many += scan;
  many += jpeg.substr(eoi);
  RgbImage out;
  absl::Status s = DecodeWith(many, DecodeLimits(), &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("more than 100 scans"), std::string::npos) << s;
  // The untouched file decodes.
  EXPECT_TRUE(DecodeWith(jpeg, DecodeLimits(), &out).ok());
  EXPECT_EQ(out.width, 64);
}

TEST(JpegStateless, MissingTablesAreNeverBorrowedFromAnEarlierImage) {
  const std::string good = Photo(96, 64, 3, 90, false);
  const std::string other = Photo(96, 64, 4, 40, false);
  // The first DQT segment becomes an APP3: the file lacks its tables.
  std::string damaged = good;
  damaged[Marker(damaged, 0xDB) + 1] = static_cast<char>(0xE3);
  JpegDecoder d;
  auto decode = [&](const std::string& jpeg, RgbImage* out) {
    return d.Decode(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(),
                    out);
  };
  RgbImage img;
  absl::Status fresh = decode(damaged, &img);
  ASSERT_TRUE(decode(good, &img).ok());
  absl::Status after_good = decode(damaged, &img);
  ASSERT_TRUE(decode(other, &img).ok());
  absl::Status after_other = decode(damaged, &img);
  EXPECT_EQ(fresh.code(), absl::StatusCode::kDataLoss) << fresh;
  EXPECT_EQ(after_good, fresh);
  EXPECT_EQ(after_other, fresh);
  // And a decoder that just failed decodes the next image exactly as a new
  // one does.
  RgbImage a, b;
  ASSERT_TRUE(decode(other, &a).ok());
  JpegDecoder fresh_decoder;
  ASSERT_TRUE(fresh_decoder
                  .Decode(reinterpret_cast<const uint8_t*>(other.data()),
                          other.size(), &b)
                  .ok());
  EXPECT_EQ(a.pixels, b.pixels);
}

// The header alone: what client decode routes by.
TEST(JpegInfo, ReadsTheHeaderOnly) {
  JpegDecoder d;
  const std::vector<uint8_t> rgb = testdata::PhotoLikeRgb(70, 40, 3);
  struct Case {
    std::string bytes;
    int components;
    bool cmyk, progressive;
  } cases[] = {
      {*testdata::EncodeJpeg(rgb, 70, 40, 90, testdata::Subsampling::k444), 3, false, false},
      {*testdata::EncodeJpeg(rgb, 70, 40, 90, testdata::Subsampling::kGray), 1, false, false},
      {*testdata::EncodeJpeg(rgb, 70, 40, 90, testdata::Subsampling::k420, true), 3, false, true},
      {*testdata::EncodeCmykJpeg(rgb, 70, 40, 90), 4, true, false},
  };
  for (const Case& c : cases) {
    JpegInfo info;
    ASSERT_TRUE(d.ReadInfo(reinterpret_cast<const uint8_t*>(c.bytes.data()), c.bytes.size(),
                           &info).ok());
    EXPECT_EQ(info.width, 70);
    EXPECT_EQ(info.height, 40);
    EXPECT_EQ(info.components, c.components);
    EXPECT_EQ(info.cmyk, c.cmyk);
    EXPECT_EQ(info.progressive, c.progressive);
    // The entropy-coded data is never read: a file cut after its header
    // still answers, and the next full decode is unaffected.
    const size_t sos = Marker(c.bytes, 0xDA);
    JpegInfo cut;
    EXPECT_TRUE(d.ReadInfo(reinterpret_cast<const uint8_t*>(c.bytes.data()), sos + 40,
                           &cut).ok());
    EXPECT_EQ(cut.width, 70);
    RgbImage img;
    ASSERT_TRUE(d.Decode(reinterpret_cast<const uint8_t*>(c.bytes.data()), c.bytes.size(),
                         &img).ok());
    EXPECT_EQ(img.width, 70);
  }
  JpegInfo info;
  const std::string junk = "not a jpeg at all";
  const absl::Status not_jpeg =
      d.ReadInfo(reinterpret_cast<const uint8_t*>(junk.data()), junk.size(), &info);
  EXPECT_EQ(not_jpeg.code(), absl::StatusCode::kDataLoss);
  // Errors reach logs: libjpeg's own text would quote the first bytes (0x6e 0x6f).
  EXPECT_NE(not_jpeg.message().find("no start-of-image marker"), std::string::npos) << not_jpeg;
  EXPECT_EQ(not_jpeg.message().find("0x6e"), std::string::npos) << not_jpeg;
  const std::string huge = ClaimSize(Photo(64, 64, 1, 90, true), 60000, 60000);
  EXPECT_EQ(d.ReadInfo(reinterpret_cast<const uint8_t*>(huge.data()), huge.size(), &info).code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace stoker
