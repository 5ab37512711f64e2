// EngineRegion's rule, and its exactness against a decoder that treats a
// region's edges as the picture's own: libjpeg-turbo decoding the region
// cut losslessly out of the file (tjTransform's crop keeps every
// coefficient). Photo-like pictures at each subsampling, and photographs.
#include "server/imaging/engine_region.h"

#include <turbojpeg.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

using Rect = std::array<int, 4>;

Rect Of(const PixelRect& r) { return {r.x0, r.y0, r.x1, r.y1}; }

RegionRequest Crop(int x0, int y0, int x1, int y1) {
  RegionRequest req;
  req.need = {x0, y0, x1, y1};
  req.crop = true;
  return req;
}

RegionRequest Whole(int x0, int y0, int x1, int y1) {
  RegionRequest req = Crop(x0, y0, x1, y1);
  req.crop = false;
  return req;
}

struct Case {
  const char* why;
  RegionRequest req;
  int width, height, mcu_width, mcu_height;
  Rect want;
};

TEST(EngineRegionTest, TheRule) {
  const Case cases[] = {
      {"4:4:4: the grid alone", Crop(13, 9, 30, 17), 100, 60, 8, 8, {8, 8, 32, 24}},
      {"4:4:4 on the grid", Crop(16, 8, 32, 24), 100, 60, 8, 8, {16, 8, 32, 24}},
      {"4:2:0: one MCU more", Crop(40, 33, 70, 50), 200, 100, 16, 16, {16, 16, 96, 80}},
      {"4:2:2: one MCU more", Crop(40, 33, 70, 50), 200, 100, 16, 8, {16, 24, 96, 64}},
      {"on the grid, widened", Crop(32, 32, 64, 64), 200, 100, 16, 16, {16, 16, 80, 80}},
      {"the picture's edges", Crop(3, 2, 190, 99), 190, 99, 16, 16, {0, 0, 190, 99}},
      {"the top left corner", Crop(17, 5, 30, 20), 190, 99, 16, 16, {0, 0, 48, 48}},
      {"past every edge", Crop(-50, -9, 500, 400), 190, 99, 16, 16, {0, 0, 190, 99}},
      // As RegionWindow: the whole picture unless a crop or when nothing
      // is asked for, whole rows when no column is.
      {"not a crop", Whole(20, 20, 40, 40), 190, 99, 16, 16, {0, 0, 190, 99}},
      {"no column", Crop(50, 50, 50, 80), 190, 99, 16, 16, {0, 32, 190, 96}},
      {"outside", Crop(500, 500, 600, 600), 190, 99, 16, 16, {0, 0, 190, 99}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Of(EngineRegion(c.req, c.width, c.height, c.mcu_width, c.mcu_height)),
              c.want) << c.why;
  }
}

struct Picture {
  std::string name;
  std::string jpeg;
  JpegInfo info;
  RgbImage whole;  // Its whole decode.
};

Picture Read(std::string name, std::string jpeg) {
  Picture p{std::move(name), std::move(jpeg), {}, {}};
  const auto* data = reinterpret_cast<const uint8_t*>(p.jpeg.data());
  EXPECT_TRUE(JpegDecoder().ReadInfo(data, p.jpeg.size(), &p.info).ok()) << p.name;
  EXPECT_TRUE(JpegDecoder().Decode(data, p.jpeg.size(), &p.whole).ok()) << p.name;
  return p;
}

// Photo-like pictures of awkward sizes at each subsampling, and the first
// photographs of a Debian wallpaper package (deploy/install-deps.sh).
std::vector<Picture> Pictures() {
  std::vector<Picture> out;
  const std::pair<testdata::Subsampling, const char*> subs[] = {
      {testdata::Subsampling::k444, "444"},
      {testdata::Subsampling::k422, "422"},
      {testdata::Subsampling::k420, "420"},
      {testdata::Subsampling::kGray, "gray"}};
  for (const auto& [sub, name] : subs) {
    const int w = 333, h = 219;
    auto jpeg = testdata::EncodeJpeg(testdata::PhotoLikeRgb(w, h, 7), w, h, 90, sub);
    EXPECT_TRUE(jpeg.ok()) << jpeg.status();
    out.push_back(Read(std::string("photo-like ") + name, jpeg.value_or("")));
  }
  for (const char* file : {"Aqua.jpg", "Dune.jpg", "LadyBird.jpg"}) {
    const std::string path = std::string("/usr/share/backgrounds/mate/nature/") + file;
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in.good()) << path << " (deploy/install-deps.sh installs it)";
    std::stringstream bytes;
    bytes << in.rdbuf();
    out.push_back(Read(path, bytes.str()));
  }
  return out;
}

// `region` of `jpeg`, cut losslessly into a JPEG of its own and decoded.
RgbImage DecodeCut(const std::string& jpeg, const PixelRect& region) {
  tjhandle tj = tjInitTransform();
  tjtransform xform{};
  xform.r = {region.x0, region.y0, region.x1 - region.x0, region.y1 - region.y0};
  xform.op = TJXOP_NONE;
  xform.options = TJXOPT_CROP;
  unsigned char* cut = nullptr;
  unsigned long cut_size = 0;  // NOLINT(runtime/int): TurboJPEG's type.
  const int rc = tjTransform(tj, reinterpret_cast<const unsigned char*>(jpeg.data()),
                             jpeg.size(), 1, &cut, &cut_size, &xform, 0);
  EXPECT_EQ(rc, 0) << tjGetErrorStr2(tj);
  RgbImage image;
  if (rc == 0) {
    EXPECT_TRUE(JpegDecoder().Decode(cut, cut_size, &image).ok());
  }
  tjFree(cut);
  tjDestroy(tj);
  return image;
}

// Bytes of `need` in the cut decode of `region` that differ from the whole
// decode's.
int64_t Differing(const std::string& jpeg, const RgbImage& whole,
                  const PixelRect& need, const PixelRect& region) {
  const RgbImage cut = DecodeCut(jpeg, region);
  EXPECT_EQ(cut.width, region.x1 - region.x0);
  EXPECT_EQ(cut.height, region.y1 - region.y0);
  if (cut.width != region.x1 - region.x0 || cut.height != region.y1 - region.y0) {
    return -1;
  }
  int64_t differing = 0;
  for (int y = need.y0; y < need.y1; ++y) {
    const uint8_t* a = &whole.pixels[(size_t{1} * y * whole.width + need.x0) * 3];
    const uint8_t* b = &cut.pixels[(size_t{1} * (y - region.y0) * cut.width +
                                    (need.x0 - region.x0)) * 3];
    for (int i = 0; i < (need.x1 - need.x0) * 3; ++i) differing += a[i] != b[i];
  }
  return differing;
}

TEST(EngineRegionTest, CropsOfTheRegionAreTheWholeDecodesPixels) {
  std::mt19937 rng(2026);
  for (const Picture& picture : Pictures()) {
    SCOPED_TRACE(picture.name);
    const JpegInfo& info = picture.info;
    const RgbImage& whole = picture.whole;
    ASSERT_GT(whole.width, 0);
    const int w = info.width, h = info.height;
    for (int k = 0; k < 24; ++k) {
      // Crops as RandomResizedCrop draws them: any size, anywhere.
      const int cw = std::uniform_int_distribution<int>(1, w)(rng);
      const int ch = std::uniform_int_distribution<int>(1, h)(rng);
      const int x0 = std::uniform_int_distribution<int>(0, w - cw)(rng);
      const int y0 = std::uniform_int_distribution<int>(0, h - ch)(rng);
      const RegionRequest req = Crop(x0, y0, x0 + cw, y0 + ch);
      const PixelRect region =
          EngineRegion(req, w, h, info.mcu_width, info.mcu_height);
      ASSERT_EQ(Differing(picture.jpeg, whole, req.need, region), 0)
          << "need " << x0 << "," << y0 << " " << cw << "x" << ch;
    }
  }
}

// Without the margin, the edge a subsampled picture's region shares with
// the crop shows: the check above can fail. 4:4:4 and gray need none.
TEST(EngineRegionTest, TheGridAloneIsNotEnoughWhenSubsampled) {
  for (const Picture& picture : Pictures()) {
    SCOPED_TRACE(picture.name);
    const JpegInfo& info = picture.info;
    const RgbImage& whole = picture.whole;
    ASSERT_GT(whole.width, 0);
    const int mw = info.mcu_width, mh = info.mcu_height;
    // A crop of MCUs 1..4 each way, so every edge is inside the picture.
    const PixelRect need{mw, mh, 5 * mw, 5 * mh};
    const int64_t differing = Differing(picture.jpeg, whole, need, need);
    if (mw > 8 || mh > 8) {
      EXPECT_GT(differing, 0);
    } else {
      EXPECT_EQ(differing, 0);
    }
  }
}

}  // namespace
}  // namespace stoker
