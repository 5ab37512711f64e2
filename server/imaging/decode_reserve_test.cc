// Large decodes are charged before they allocate, and a thread keeps a
// large picture's buffers only while it decodes large pictures.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/imaging/decode.h"
#include "server/imaging/jpeg.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

// A limits' reserve hook that records what it was asked and hands out
// tokens counting themselves while alive.
struct Recorder {
  std::vector<int64_t> asked;
  std::shared_ptr<int> live = std::make_shared<int>(0);
  absl::Status refuse;  // Not OK: every reservation fails with it.
  DecodeLimits Limits() {
    DecodeLimits limits;
    limits.reserve = [this](int64_t bytes,
                            bool wait) -> absl::StatusOr<std::shared_ptr<void>> {
      if (!wait && !refuse.ok()) return nullptr;  // No room now: then waits.
      asked.push_back(bytes);
      if (!refuse.ok()) return refuse;
      ++*live;
      std::shared_ptr<int> counter = live;
      return std::shared_ptr<void>(new int(0), [counter](void* p) {
        --*counter;
        delete static_cast<int*>(p);
      });
    };
    return limits;
  }
};

RegionRequest Whole(int w, int h) { return RegionRequest{8, PixelRect{0, 0, w, h}, false}; }

std::string Picture(bool png, int w, int h) {
  const std::vector<uint8_t> rgb = testdata::PhotoLikeRgb(w, h, 7);
  return *(png ? testdata::EncodePng(rgb, w, h, testdata::PngKind::kRgb8)
               : testdata::EncodeJpeg(rgb, w, h, 90));
}

// 2600 x 2400 RGB: 18.7 MB of pixels, over kKeptDecodeBytes; encoded once.
const std::string& Big(bool png) {
  static const std::string* const pictures[2] = {new std::string(Picture(false, 2600, 2400)),
                                                 new std::string(Picture(true, 2600, 2400))};
  return *pictures[png ? 1 : 0];
}

TEST(DecodeReserveTest, ALargeDecodeIsChargedUntilItsPictureIsDoneWith) {
  for (const bool png : {false, true}) {
    const std::string& big = Big(png);
    Recorder rec;
    ImageRequest request;
    request.limits = rec.Limits();
    ScratchImage image;
    ASSERT_TRUE(DecodeImage(reinterpret_cast<const uint8_t*>(big.data()), big.size(), request,
                            Whole, &image).ok());
    ASSERT_EQ(rec.asked.size(), 1u) << png;
    EXPECT_GE(rec.asked[0], int64_t{2600} * 2400 * 3) << png;
    EXPECT_EQ(*rec.live, 1) << png;  // Held while the picture is in use.
    EXPECT_EQ(image.pixels.size(), size_t{2600} * 2400 * 3);
    DoneWith(&image);
    EXPECT_EQ(*rec.live, 0) << png;
    // Kept for the thread's next large picture...
    EXPECT_GE(image.pixels.capacity(), size_t{2600} * 2400 * 3) << png;
    // ...until it decodes a small one, which asks nothing.
    const std::string small = Picture(png, 300, 200);
    ASSERT_TRUE(DecodeImage(reinterpret_cast<const uint8_t*>(small.data()), small.size(),
                            request, Whole, &image).ok());
    EXPECT_EQ(rec.asked.size(), 1u) << png;
    DoneWith(&image);
    EXPECT_EQ(image.pixels.size(), size_t{300} * 200 * 3) << png;
    EXPECT_LE(image.pixels.capacity(), size_t{kKeptDecodeBytes}) << png;
    // Or until the thread runs out of work; a small buffer stays.
    ASSERT_TRUE(DecodeImage(reinterpret_cast<const uint8_t*>(big.data()), big.size(), request,
                            Whole, &image).ok());
    DoneWith(&image);
    TrimDecodeScratch();
    EXPECT_EQ(image.pixels.capacity(), 0u) << png;
    ASSERT_TRUE(DecodeImage(reinterpret_cast<const uint8_t*>(small.data()), small.size(),
                            request, Whole, &image).ok());
    TrimDecodeScratch();
    EXPECT_EQ(image.pixels.size(), size_t{300} * 200 * 3) << png;
  }
}

TEST(DecodeReserveTest, ARefusedReservationEndsTheDecodeWithItsError) {
  for (const bool png : {false, true}) {
    const std::string& big = Big(png);
    Recorder rec;
    rec.refuse = absl::ResourceExhaustedError("no room for it");
    ImageRequest request;
    request.limits = rec.Limits();
    Image image;
    absl::Status s = DecodeImage(reinterpret_cast<const uint8_t*>(big.data()), big.size(),
                                 request, Whole, &image);
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << png << s;
    EXPECT_EQ(s.message(), "no room for it") << png;
    EXPECT_EQ(rec.asked.size(), 1u);
    EXPECT_LT(image.pixels.capacity(), size_t{2600} * 2400) << png;  // Nothing decoded.
  }
}

TEST(DecodeReserveTest, ACorruptLargeDecodeGivesItsReservationBack) {
  for (const bool png : {false, true}) {
    std::string big = Big(png);
    big.resize(big.size() * 3 / 4);  // Cut: the decode fails after it began.
    if (!png) big += "\xff\xd9";
    Recorder rec;
    ImageRequest request;
    request.limits = rec.Limits();
    Image image;
    absl::Status s = DecodeImage(reinterpret_cast<const uint8_t*>(big.data()), big.size(),
                                 request, Whole, &image);
    // A JPEG cut short decodes with a warning, which is an error here.
    EXPECT_FALSE(s.ok()) << png;
    EXPECT_EQ(rec.asked.size(), 1u) << png;
    EXPECT_EQ(*rec.live, 0) << png;
    EXPECT_EQ(image.reserved, nullptr) << png;
  }
}

}  // namespace
}  // namespace stoker
