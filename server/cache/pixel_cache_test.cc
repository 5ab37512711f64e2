// The pixel cache's unit: the bounded size, what a fill decodes, and where
// entries are found again (RAM, L2 after a restart, never for another
// version or an unversioned source's L2).
#include "server/cache/pixel_cache.h"

#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"

#include "gtest/gtest.h"
#include "server/dataset/memory_source.h"
#include "tests/testdata.h"
#include "server/cache/l2_cache_testing.h"

namespace stoker {
namespace {

TEST(PixelCacheTest, BoundedSizeKeepsTheAspect) {
  const int cases[][5] = {{640, 480, 256, 256, 192}, {480, 640, 256, 192, 256},
                          {200, 100, 256, 200, 100}, {1000, 1, 256, 256, 1},
                          {257, 256, 256, 256, 255}};
  for (const auto& c : cases) {
    int w = 0, h = 0;
    BoundedSize(c[0], c[1], c[2], &w, &h);
    EXPECT_EQ(w, c[3]) << c[0] << "x" << c[1];
    EXPECT_EQ(h, c[4]) << c[0] << "x" << c[1];
  }
}

// Whether a kept picture's view lies where the decode's region does.
::testing::AssertionResult SameWindow(const ImageView& kept, const Image& decoded) {
  if (kept.x == decoded.x && kept.y == decoded.y && kept.width == decoded.width &&
      kept.height == decoded.height && kept.scaled_width == decoded.scaled_width &&
      kept.scaled_height == decoded.scaled_height) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "kept " << kept.width << "x" << kept.height << " at " << kept.x << "," << kept.y
         << " of " << kept.scaled_width << "x" << kept.scaled_height << "; decoded "
         << decoded.width << "x" << decoded.height << " at " << decoded.x << "," << decoded.y
         << " of " << decoded.scaled_width << "x" << decoded.scaled_height;
}

// An exact entry is the picture a decode gives: whole for a decode that
// asks for it all, and for a PNG decoded per crop the very rows (origin,
// height and bytes) that decode keeps.
TEST(PixelCacheTest, AnExactEntryIsWhatTheDecodeGives) {
  const int w = 90, h = 70;
  const std::vector<uint8_t> rgb = testdata::PhotoLikeRgb(w, h, 8);
  absl::StatusOr<std::string> png = testdata::EncodePng(rgb, w, h, testdata::PngKind::kRgb8);
  ASSERT_TRUE(png.ok());
  const auto* data = reinterpret_cast<const uint8_t*>(png->data());
  ASSERT_TRUE(PngRowsAlone(data, png->size()));
  const ImageRequest request;
  // Rows 20..41 at a DCT scale of 1/2 (a PNG is never scaled: rows 40..83,
  // cut to the picture), cropped; then the whole picture.
  const RegionRequest wants[] = {RegionRequest{4, PixelRect{5, 20, 30, 42}, true},
                                 RegionRequest{8, PixelRect{0, 0, w, h}, false}};
  absl::StatusOr<Bytes> entry = DecodeBounded(data, png->size(), request, 0, Filter::kNearest);
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_FALSE(KeptOf(*entry).scaled);
  EXPECT_EQ(KeptOf(*entry).source_width, w);
  for (const RegionRequest& want : wants) {
    Image decoded, scratch;
    ASSERT_TRUE(
        DecodeImage(data, png->size(), request, [&](int, int) { return want; }, &decoded).ok());
    absl::StatusOr<ImageView> kept = ExactView(*entry, want, &scratch);
    ASSERT_TRUE(kept.ok()) << kept.status();
    SCOPED_TRACE(absl::StrCat("crop ", want.crop));
    ASSERT_TRUE(SameWindow(*kept, decoded));
    ASSERT_EQ(decoded.pixels.size(), static_cast<size_t>(kept->width) * kept->height * 3);
    EXPECT_EQ(std::memcmp(kept->pixels, decoded.pixels.data(), decoded.pixels.size()), 0);
  }
}

// A progressive JPEG cut short (coefficients left unsent): libjpeg smooths
// its blocks, so a region decodes otherwise than the whole. It is kept for
// whole decodes only.
TEST(PixelCacheTest, ASmoothedJpegIsKeptForWholeDecodesOnly) {
  const int w = 301, h = 203;
  absl::StatusOr<std::string> full = testdata::EncodeJpeg(
      testdata::PhotoLikeRgb(w, h, 9), w, h, 90, testdata::Subsampling::k420, true);
  ASSERT_TRUE(full.ok());
  absl::StatusOr<std::string> cut = testdata::FirstScans(*full, 3);
  ASSERT_TRUE(cut.ok()) << cut.status();
  const auto* data = reinterpret_cast<const uint8_t*>(cut->data());
  const ImageRequest request;
  const RegionRequest region{8, PixelRect{100, 40, 220, 150}, true};
  DecodedRegion decoded;
  ASSERT_TRUE(ThreadLocalDecoder()
                  .Decode(data, cut->size(), [&](int, int) { return region; }, &decoded)
                  .ok());
  EXPECT_TRUE(decoded.region_dependent);
  for (const int eighths : {8, 4}) {
    absl::StatusOr<Bytes> entry =
        DecodeBounded(data, cut->size(), request, 0, Filter::kNearest, eighths);
    ASSERT_TRUE(entry.ok()) << entry.status();
    EXPECT_TRUE(KeptOf(*entry).whole_only);
    Image scratch;
    RegionRequest want = region;
    want.eighths = eighths;
    EXPECT_EQ(ExactView(*entry, want, &scratch).status().code(),
              absl::StatusCode::kFailedPrecondition);
    const int sw = ScaledSize(w, eighths), sh = ScaledSize(h, eighths);
    absl::StatusOr<ImageView> whole =
        ExactView(*entry, RegionRequest{eighths, PixelRect{0, 0, sw, sh}, false}, &scratch);
    ASSERT_TRUE(whole.ok()) << whole.status();
    EXPECT_EQ(whole->width, sw);
  }
  // A complete progressive file is not smoothed: kept for regions too.
  absl::StatusOr<Bytes> complete = DecodeBounded(
      reinterpret_cast<const uint8_t*>(full->data()), full->size(), request, 0,
      Filter::kNearest);
  ASSERT_TRUE(complete.ok());
  EXPECT_FALSE(KeptOf(*complete).whole_only);
}

// A JPEG is kept once per DCT scale. Through ExactView, the entry of a
// scale is the region a crop decode at that scale gives: the same window
// (libjpeg's iMCU-aligned columns, the rows asked for) and the same pixels
// but for the region's outermost ring inside the picture, where libjpeg's
// upsampling lacks the neighbours a whole decode has (the plan's margin
// keeps the renderer's weights off that ring).
TEST(PixelCacheTest, AJpegKeptAtAScaleIsTheRegionACropDecodeGives) {
  const int w = 301, h = 203;
  const std::vector<uint8_t> rgb = testdata::PhotoLikeRgb(w, h, 5);
  struct Form {
    const char* name;
    absl::StatusOr<std::string> bytes;
  };
  Form forms[] = {
      {"4:2:0", testdata::EncodeJpeg(rgb, w, h, 90, testdata::Subsampling::k420)},
      {"4:2:2", testdata::EncodeJpeg(rgb, w, h, 90, testdata::Subsampling::k422)},
      {"4:4:4", testdata::EncodeJpeg(rgb, w, h, 90, testdata::Subsampling::k444)},
      {"gray", testdata::EncodeJpeg(rgb, w, h, 90, testdata::Subsampling::kGray)},
      {"progressive", testdata::EncodeJpeg(rgb, w, h, 90, testdata::Subsampling::k420, true)},
      {"cmyk", testdata::EncodeCmykJpeg(rgb, w, h, 90)},
  };
  uint64_t state = 7;
  auto next = [&](int n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int>((state >> 33) % static_cast<uint64_t>(n));
  };
  for (Form& form : forms) {
    ASSERT_TRUE(form.bytes.ok()) << form.name;
    const auto* data = reinterpret_cast<const uint8_t*>(form.bytes->data());
    for (const int channels : {3, 1}) {
      ImageRequest request;
      request.channels = channels;
      for (const int eighths : {8, 4, 2, 1}) {
        absl::StatusOr<Bytes> entry = DecodeBounded(data, form.bytes->size(), request, 0,
                                                    Filter::kNearest, eighths);
        ASSERT_TRUE(entry.ok()) << entry.status();
        const KeptPicture k = KeptOf(*entry);
        EXPECT_TRUE(k.scaled);
        EXPECT_EQ(k.eighths, eighths);
        EXPECT_EQ(k.source_width, w);
        EXPECT_EQ(k.source_height, h);
        const int sw = ScaledSize(w, eighths), sh = ScaledSize(h, eighths);
        for (int i = 0; i < 12; ++i) {
          const int x0 = next(sw - 2), y0 = next(sh - 2);
          const RegionRequest want{eighths,
                                   PixelRect{x0, y0, x0 + 2 + next(sw - x0 - 1),
                                             y0 + 2 + next(sh - y0 - 1)},
                                   i % 4 != 3};
          SCOPED_TRACE(absl::StrCat(form.name, " channels ", channels, " scale ", eighths,
                                    "/8, want [", want.need.x0, ",", want.need.x1, ")x[",
                                    want.need.y0, ",", want.need.y1, ") crop ", want.crop));
          Image decoded, scratch;
          ASSERT_TRUE(DecodeImage(data, form.bytes->size(), request,
                                  [&](int, int) { return want; }, &decoded)
                          .ok());
          absl::StatusOr<ImageView> kept = ExactView(*entry, want, &scratch);
          ASSERT_TRUE(kept.ok()) << kept.status();
          ASSERT_TRUE(SameWindow(*kept, decoded));
          // Inside the ring (a side on the picture's edge has none).
          const int l = kept->x > 0, t = kept->y > 0;
          const int r = kept->x + kept->width < sw, b = kept->y + kept->height < sh;
          int differ = 0;
          for (int y = t; y < kept->height - b; ++y) {
            const size_t row = static_cast<size_t>(y) * kept->width * channels;
            differ += std::memcmp(kept->pixels + row + l * channels,
                                  decoded.pixels.data() + row + l * channels,
                                  static_cast<size_t>(kept->width - l - r) * channels) != 0;
          }
          EXPECT_EQ(differ, 0);
        }
      }
      // Another scale than the entry's is refused, never served.
      absl::StatusOr<Bytes> half =
          DecodeBounded(data, form.bytes->size(), request, 0, Filter::kNearest, 4);
      ASSERT_TRUE(half.ok());
      Image scratch;
      EXPECT_EQ(ExactView(*half, RegionRequest{8, PixelRect{0, 0, w, h}, true}, &scratch)
                    .status()
                    .code(),
                absl::StatusCode::kInternal);
    }
  }
}

struct Jpeg {
  explicit Jpeg(int w, int h) {
    absl::StatusOr<std::string> j = testdata::EncodeJpeg(testdata::PhotoLikeRgb(w, h, 5), w, h, 90);
    EXPECT_TRUE(j.ok());
    bytes = std::make_shared<const std::string>(*j);
  }
  Bytes bytes;
};

TEST(PixelCacheTest, AFillDecodesOnceAndIsFoundAgain) {
  Jpeg jpeg(640, 480);
  auto src = std::make_shared<MemorySource>("root");
  src->Put("a.jpg", *jpeg.bytes);
  absl::StatusOr<SourceKey> file = src->Identify("a.jpg");
  ASSERT_TRUE(file.ok());
  const ImageRequest request;
  const std::string key = PixelCache::Key(*file, 256, request);
  ShardedLruCache ram("pixels", 16 << 20);
  PixelCache cache(&ram, nullptr);
  bool versioned = true;
  EXPECT_EQ(cache.Lookup(*src, *file, key, &versioned), nullptr);
  EXPECT_FALSE(versioned);  // No L2.

  // Concurrent fills of one picture decode it once.
  std::vector<absl::StatusOr<Bytes>> filled(4);
  std::vector<std::thread> threads;
  for (auto& f : filled) {
    threads.emplace_back([&] {
      f = cache.Fill(key, jpeg.bytes, request, 256, 8, Filter::kBilinear, false, file->version,
                     L2Cache::kNobody);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(cache.decodes(), 1u);
  for (const auto& f : filled) {
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(*f, *filled[0]);  // The same entry.
  }
  const ImageView px = PixelsOf(*filled[0]);
  EXPECT_EQ(px.width, 256);
  EXPECT_EQ(px.height, 192);
  EXPECT_EQ(px.channels, 3);
  EXPECT_EQ(cache.Lookup(*src, *file, key, &versioned), *filled[0]);

  // The same bytes made by hand: a fill is DecodeBounded.
  absl::StatusOr<Bytes> direct = DecodeBounded(
      reinterpret_cast<const uint8_t*>(jpeg.bytes->data()), jpeg.bytes->size(), request, 256,
      Filter::kBilinear);
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(**direct, **filled[0]);

  // Another version of the file is another picture.
  FileVersion edited = file->version;
  edited.mtime_ns += 1;
  EXPECT_EQ(cache.Lookup(*src, SourceKey{file->file, edited}, key, &versioned), nullptr);
}

TEST(PixelCacheTest, L2KeepsPicturesOfVersionedSourcesAcrossARestart) {
  Jpeg jpeg(320, 240);
  auto files = std::make_shared<MemorySource>("root");
  auto lmdb = std::make_shared<MemorySource>("env", /*versioned=*/false);
  files->Put("a.jpg", *jpeg.bytes);
  lmdb->Put("a.jpg", *jpeg.bytes);
  const ImageRequest request;
  L2Options options;
  options.path = testdata::MakeTempDir("pixels-l2");
  options.max_bytes = 64 << 20;
  absl::StatusOr<SourceKey> file = files->Identify("a.jpg");
  absl::StatusOr<SourceKey> entry = lmdb->Identify("a.jpg");
  ASSERT_TRUE(file.ok() && entry.ok());
  const std::string file_key = PixelCache::Key(*file, 128, request);
  const std::string lmdb_key = PixelCache::Key(*entry, 128, request);
  {
    absl::StatusOr<std::unique_ptr<L2Cache>> l2 = L2Cache::Open(options);
    ASSERT_TRUE(l2.ok());
    ShardedLruCache ram("pixels", 16 << 20);
    PixelCache cache(&ram, l2->get());
    bool versioned = false;
    EXPECT_EQ(cache.Lookup(*files, *file, file_key, &versioned), nullptr);
    EXPECT_TRUE(versioned);
    constexpr int64_t kUid = 1000;  // The filling session's.
    absl::StatusOr<Bytes> filled = cache.Fill(file_key, jpeg.bytes, request, 128, 8,
                                              Filter::kBilinear, versioned, file->version, kUid);
    ASSERT_TRUE(filled.ok());
    EXPECT_EQ(cache.Lookup(*lmdb, *entry, lmdb_key, &versioned), nullptr);
    EXPECT_FALSE(versioned);
    ASSERT_TRUE(cache.Fill(lmdb_key, jpeg.bytes, request, 128, 8, Filter::kBilinear, versioned,
                           entry->version, kUid).ok());
    L2CacheTesting::Flush(**l2);
    EXPECT_EQ((*l2)->Stats().inserts(), 1u);
    EXPECT_EQ((*l2)->OwnedBytes(kUid), L2Cache::ValueBytes(file_key.size(), (*filled)->size()));
  }
  absl::StatusOr<std::unique_ptr<L2Cache>> l2 = L2Cache::Open(options);
  ASSERT_TRUE(l2.ok());
  ShardedLruCache ram("pixels", 16 << 20);
  PixelCache cache(&ram, l2->get());
  bool versioned = false;
  Bytes found = cache.Lookup(*files, *file, file_key, &versioned);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(PixelsOf(found).width, 128);
  EXPECT_EQ(PixelsOf(found).height, 96);
  EXPECT_EQ(cache.Lookup(*lmdb, *entry, lmdb_key, &versioned), nullptr);
  EXPECT_EQ(cache.decodes(), 0u);
  // Rewritten while the daemon was down: stale, decoded afresh.
  files->Put("a.jpg", *jpeg.bytes, 9);
  absl::StatusOr<SourceKey> rewritten = files->Identify("a.jpg");
  ASSERT_TRUE(rewritten.ok());
  EXPECT_EQ(cache.Lookup(*files, *rewritten, PixelCache::Key(*rewritten, 128, request),
                         &versioned),
            nullptr);
}

}  // namespace
}  // namespace stoker
