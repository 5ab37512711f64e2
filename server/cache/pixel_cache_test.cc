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

// An exact entry is the picture a decode gives: whole for a decode that
// asks for it all, and for a PNG decoded per crop the very rows (origin,
// height and bytes) that decode keeps.
TEST(PixelCacheTest, AnExactEntryIsWhatTheDecodeGives) {
  const int w = 90, h = 70;
  const std::vector<uint8_t> rgb = testdata::PhotoLikeRgb(w, h, 8);
  absl::StatusOr<std::string> png = testdata::EncodePng(rgb, w, h, testdata::PngKind::kRgb8);
  ASSERT_TRUE(png.ok());
  absl::StatusOr<std::string> jpeg = testdata::EncodeJpeg(rgb, w, h, 90);
  ASSERT_TRUE(jpeg.ok());
  const auto* png_data = reinterpret_cast<const uint8_t*>(png->data());
  ASSERT_TRUE(PngRowsAlone(png_data, png->size()));
  ASSERT_FALSE(PngRowsAlone(reinterpret_cast<const uint8_t*>(jpeg->data()), jpeg->size()));
  const ImageRequest request;
  // Rows 20..41 at a DCT scale of 1/2 (a PNG is never scaled: rows 40..83,
  // cut to the picture), cropped; then the whole picture.
  const RegionRequest wants[] = {RegionRequest{4, PixelRect{5, 20, 30, 42}, true},
                                 RegionRequest{8, PixelRect{0, 0, w, h}, false}};
  for (const std::string* file : {&*png, &*jpeg}) {
    const auto* data = reinterpret_cast<const uint8_t*>(file->data());
    absl::StatusOr<Bytes> entry = DecodeBounded(data, file->size(), request, 0, Filter::kNearest);
    ASSERT_TRUE(entry.ok()) << entry.status();
    for (const RegionRequest& want : wants) {
      if (file == &*jpeg && want.crop) continue;  // JPEGs are kept only when decoded whole.
      Image decoded;
      ASSERT_TRUE(DecodeImage(data, file->size(), request,
                              [&](int, int) { return want; }, &decoded)
                      .ok());
      const ImageView kept = ExactView(*entry, want);
      SCOPED_TRACE(absl::StrCat(file == &*png ? "png" : "jpeg", " crop ", want.crop));
      EXPECT_EQ(kept.y, decoded.y);
      EXPECT_EQ(kept.x, decoded.x);
      EXPECT_EQ(kept.width, decoded.width);
      EXPECT_EQ(kept.height, decoded.height);
      EXPECT_EQ(kept.scaled_width, decoded.scaled_width);
      EXPECT_EQ(kept.scaled_height, decoded.scaled_height);
      ASSERT_EQ(decoded.pixels.size(), static_cast<size_t>(kept.width) * kept.height * 3);
      EXPECT_EQ(std::memcmp(kept.pixels, decoded.pixels.data(), decoded.pixels.size()), 0);
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
      f = cache.Fill(key, jpeg.bytes, request, 256, Filter::kBilinear, false, file->version,
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
    absl::StatusOr<Bytes> filled = cache.Fill(file_key, jpeg.bytes, request, 128,
                                              Filter::kBilinear, versioned, file->version, kUid);
    ASSERT_TRUE(filled.ok());
    EXPECT_EQ(cache.Lookup(*lmdb, *entry, lmdb_key, &versioned), nullptr);
    EXPECT_FALSE(versioned);
    ASSERT_TRUE(cache.Fill(lmdb_key, jpeg.bytes, request, 128, Filter::kBilinear, versioned,
                           entry->version, kUid).ok());
    (*l2)->Flush();
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
