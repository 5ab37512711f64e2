// ServingSession's pixel cache, automatic: kept pictures give the batches
// of decoding every epoch (PNG and JPEG, every decode mode and JPEG form,
// many crops), claims shared by user and content, eviction across users,
// encoded fields, and datasets that do not fit.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "server/serve/session_testing.h"

namespace stoker {
namespace {

using namespace session_testing;  // NOLINT: the tests' own helpers.

// The automatic pixel cache keeps pictures exactly: every epoch's batches
// are those of decoding each epoch, for PNGs and JPEGs in every decode
// mode (a JPEG decoded per crop is kept once per DCT scale its crops take).
TEST(ServingSessionTest, AutomaticPixelsGiveTheBatchesOfDecodingEachEpoch) {
  struct Case {
    const char* suffix;
    const char* decode;
    bool scales;  // JPEGs kept at more than one DCT scale.
  };
  const Case cases[] = {
      {".png", "DECODE_AUTO", false},       {".png", "DECODE_FULL", false},
      {".jpg", "DECODE_FULL", false},       {".jpg", "DECODE_CROP", false},
      {".jpg", "DECODE_SCALE_CROP", true},  {".jpg", "DECODE_AUTO", true},
  };
  constexpr int kSamples = 20, kEpochs = 3;
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.suffix, " ", c.decode));
    auto src = std::string(c.suffix) == ".png" ? Pngs(kSamples) : Photos(kSamples);
    const std::string train = absl::StrCat(
        R"({"transform": "TRANSFORM_TRAIN", "image_size": 24, "dtype": "DTYPE_UINT8",
            "batch_size": 4, "shuffle": true, "seed": 5, "decode": ")", c.decode, R"(")");
    Shared off_shared(2), auto_shared(2);
    v1::SessionStats off_stats, auto_stats;
    const std::vector<uint64_t> want =
        Epochs(train + R"(, "pixel_cache": {"off": true}})", src, c.suffix, kSamples,
               kEpochs, &off_shared, &off_stats);
    const std::vector<uint64_t> got =
        Epochs(train + "}", src, c.suffix, kSamples, kEpochs, &auto_shared, &auto_stats);
    ASSERT_EQ(want.size(), size_t{kEpochs * 5});
    EXPECT_EQ(got, want);
    EXPECT_NE(want[0], want[5]) << "epochs draw new crops";
    EXPECT_EQ(off_stats.pixel_mode(), v1::PIXEL_MODE_OFF);
    EXPECT_EQ(auto_stats.pixel_mode(), v1::PIXEL_MODE_KEPT) << auto_stats.pixel_cache_why();
    EXPECT_EQ(off_shared.pixels.decodes(), 0u);
    EXPECT_GT(auto_stats.pixel_cache_bytes(), 0u);
    if (c.scales) {
      // Once per picture and scale its crops take.
      EXPECT_GT(auto_shared.pixels.decodes(), uint64_t{kSamples});
      EXPECT_LE(auto_shared.pixels.decodes(), uint64_t{4 * kSamples});
    } else {
      EXPECT_EQ(auto_shared.pixels.decodes(), uint64_t{kSamples});  // Once each.
    }
  }
}

// An object store's files are proven only by the session's own read of
// them (SourceKey::proven): that read fills their pictures in the cold
// epoch as a local file's does, with the batches of decoding each epoch.
TEST(ServingSessionTest, PicturesOfFilesProvenByReadingAreKeptInTheColdEpoch) {
  constexpr int kSamples = 20, kEpochs = 3;
  for (const char* suffix : {".jpg", ".png"}) {
    SCOPED_TRACE(suffix);
    auto src = std::string(suffix) == ".png" ? Pngs(kSamples) : Photos(kSamples);
    const std::string train =
        R"({"transform": "TRANSFORM_TRAIN", "image_size": 24, "dtype": "DTYPE_UINT8",
            "batch_size": 4, "shuffle": true, "seed": 5, "decode": "DECODE_FULL")";
    Shared off_shared(2), cold_shared(2), auto_shared(2);
    v1::SessionStats off_stats, cold_stats, auto_stats;
    const std::vector<uint64_t> want =
        Epochs(train + R"(, "pixel_cache": {"off": true}})", src, suffix, kSamples, kEpochs,
               &off_shared, &off_stats);
    src->ProveByReading();
    const int before = src->reads();
    Epochs(train + "}", src, suffix, kSamples, 1, &cold_shared, &cold_stats);
    // Each picture decoded once, by the fill of the epoch that read it.
    EXPECT_EQ(cold_shared.pixels.decodes(), uint64_t{kSamples});
    EXPECT_EQ(src->reads() - before, kSamples);

    src->ProveByReading();
    const std::vector<uint64_t> got =
        Epochs(train + "}", src, suffix, kSamples, kEpochs, &auto_shared, &auto_stats);
    EXPECT_EQ(got, want);
    EXPECT_EQ(auto_stats.pixel_mode(), v1::PIXEL_MODE_KEPT) << auto_stats.pixel_cache_why();
    EXPECT_EQ(auto_shared.pixels.decodes(), uint64_t{kSamples});
  }
}

// JPEGs as cameras and encoders write them (every chroma layout, gray,
// progressive, Adobe CMYK, and progressive files cut short after a few
// scans, whose regions libjpeg smooths otherwise than their whole), larger
// than the crops, under bilinear and bicubic crops at every DCT scale:
// kept, and bit-identical to decoding each crop's region every epoch, over
// many epochs.
TEST(ServingSessionTest, JpegsKeptPerScaleGiveTheCropDecodesBatches) {
  constexpr int kSamples = 24, kEpochs = 6;
  auto src = std::make_shared<MemorySource>("root");
  const testdata::Subsampling subs[] = {testdata::Subsampling::k420, testdata::Subsampling::k422,
                                        testdata::Subsampling::k444, testdata::Subsampling::kGray};
  for (int i = 0; i < kSamples; ++i) {
    const int w = 150 + 13 * i, h = 120 + 9 * i;
    const std::vector<uint8_t> rgb = testdata::PhotoLikeRgb(w, h, 300 + i);
    absl::StatusOr<std::string> j =
        i % 6 == 5 ? testdata::EncodeCmykJpeg(rgb, w, h, 85)
                   : testdata::EncodeJpeg(rgb, w, h, 85, subs[i % 4], /*progressive=*/i % 6 == 4);
    ASSERT_TRUE(j.ok());
    if (i % 12 == 10) j = testdata::FirstScans(*j, 3);  // Cut short: smoothed.
    ASSERT_TRUE(j.ok()) << j.status();
    src->Put(absl::StrCat("p", i, ".jpg"), *j);
  }
  for (const char* interpolation : {"INTERPOLATION_BILINEAR", "INTERPOLATION_BICUBIC"}) {
    SCOPED_TRACE(interpolation);
    const std::string train = absl::StrCat(
        R"({"batch_size": 4, "shuffle": true, "seed": 11, "decode": "DECODE_AUTO",
            "fields": [{"name": "image", "kind": "KIND_IMAGE", "shape": [28, 28, 3],
                        "dtype": "DTYPE_UINT8"}],
            "pipeline": [{"random_resized_crop": {"width": 28, "height": 28,
                                                  "interpolation": ")",
        interpolation, R"("}}, {"flip": {}}])");
    Shared off_shared(2), auto_shared(2, 256 << 20);
    v1::SessionStats stats;
    const std::vector<uint64_t> want = Epochs(train + R"(, "pixel_cache": {"off": true}})",
                                              src, ".jpg", kSamples, kEpochs, &off_shared,
                                              &stats);
    ASSERT_EQ(want.size(), size_t{kEpochs * kSamples / 4});
    EXPECT_EQ(Epochs(train + "}", src, ".jpg", kSamples, kEpochs, &auto_shared, &stats), want);
    EXPECT_EQ(stats.pixel_mode(), v1::PIXEL_MODE_KEPT) << stats.pixel_cache_why();
    EXPECT_GT(auto_shared.pixels.decodes(), uint64_t{kSamples});
    EXPECT_LE(auto_shared.pixels.decodes(), uint64_t{4 * kSamples});
  }
}

// Large PNGs cropped by a crop-decoding session: the kept picture is
// rendered from the rows that session's own decode keeps (the resampler's
// weights follow the window's origin), so many crops stay bit-identical.
TEST(ServingSessionTest, LargePngsKeptExactlyAcrossManyCrops) {
  constexpr int kSamples = 48;
  auto src = Pngs(kSamples, 300, 7, 260, 5, 500);
  const std::string train = R"({"transform": "TRANSFORM_TRAIN", "image_size": 64,
      "dtype": "DTYPE_UINT8", "batch_size": 4, "shuffle": true, "seed": 9)";
  // 48 pictures of up to 0.9 MiB, 43 MiB in all, in a 256 MiB cache: none
  // is evicted and decoded again.
  Shared off_shared(2), auto_shared(2, 256 << 20);
  v1::SessionStats stats;
  const std::vector<uint64_t> want = Epochs(train + R"(, "pixel_cache": {"off": true}})", src,
                                            ".png", kSamples, 12, &off_shared, &stats);
  EXPECT_EQ(Epochs(train + "}", src, ".png", kSamples, 12, &auto_shared, &stats), want);
  EXPECT_EQ(stats.pixel_mode(), v1::PIXEL_MODE_KEPT) << stats.pixel_cache_why();
  EXPECT_EQ(auto_shared.pixels.decodes(), uint64_t{kSamples});
}

// JPEGs a decode="full" session kept whole serve a session decoding per
// crop wherever its crops take the whole scale, exactly; it decodes only
// the other scales it needs.
TEST(ServingSessionTest, JpegsKeptWholeServeCropDecodesExactly) {
  constexpr int kSamples = 8;
  auto src = Photos(kSamples);
  const std::string train = R"({"transform": "TRANSFORM_TRAIN", "image_size": 24,
      "dtype": "DTYPE_UINT8", "batch_size": 4, "shuffle": true, "seed": 5, "decode": )";
  Shared shared(2), off_shared(2), alone_shared(2);
  v1::SessionStats stats;
  Epochs(train + R"("DECODE_FULL"})", src, ".jpg", kSamples, 1, &shared, &stats);
  ASSERT_EQ(stats.pixel_mode(), v1::PIXEL_MODE_KEPT) << stats.pixel_cache_why();
  ASSERT_EQ(shared.pixels.decodes(), uint64_t{kSamples});
  const std::vector<uint64_t> want =
      Epochs(train + R"("DECODE_SCALE_CROP", "pixel_cache": {"off": true}})", src, ".jpg",
             kSamples, 3, &off_shared, &stats);
  EXPECT_EQ(Epochs(train + R"("DECODE_SCALE_CROP"})", src, ".jpg", kSamples, 3, &shared, &stats),
            want);
  EXPECT_EQ(stats.pixel_mode(), v1::PIXEL_MODE_KEPT);
  // The same session on a cache of its own decodes the whole scale too.
  EXPECT_EQ(Epochs(train + R"("DECODE_SCALE_CROP"})", src, ".jpg", kSamples, 3, &alone_shared,
                   &stats),
            want);
  EXPECT_LT(shared.pixels.decodes() - kSamples, alone_shared.pixels.decodes());
}

// Two users share the pixel cache. Alice's pictures fit it alone; Bob's fit
// his half. When Bob comes, Alice's claim beyond her half is revoked (she
// keeps what is there, inserts nothing more, and her pictures are evicted
// as Bob's come in); Bob keeps his, each decoded once. When Bob leaves,
// Alice asks again and keeps hers. Both sessions' batches stay those of
// decoding every epoch.
TEST(ServingSessionTest, ANewcomerWithinItsShareTakesTheRoomOfAUserOverIts) {
  constexpr int kSamples = 24, kBatches = kSamples / 4;
  auto alice_src = Pngs(kSamples, 110, 0, 100, 0, 700, "alice");  // 24 x 33 KB: 0.76 MiB.
  auto bob_src = Pngs(kSamples, 70, 0, 70, 0, 800, "bob");         // 24 x 14.7 KB: 0.34 MiB.
  const std::string train = R"({"transform": "TRANSFORM_TRAIN", "image_size": 24,
      "dtype": "DTYPE_UINT8", "batch_size": 4, "shuffle": true, "seed": 5)";
  constexpr int64_t kAlice = 1001, kBob = 1002;
  Shared off(2);
  v1::SessionStats stats;
  const std::vector<uint64_t> alice_want = Epochs(
      train + R"(, "pixel_cache": {"off": true}})", alice_src, ".png", kSamples, 4, &off, &stats);
  const std::vector<uint64_t> bob_want = Epochs(
      train + R"(, "pixel_cache": {"off": true}})", bob_src, ".png", kSamples, 3, &off, &stats);

  Shared shared(2, 1 << 20);
  auto alice = Open(train + "}", MemoryDataset(alice_src, Files(kSamples, ".png")), &shared, 1,
                    nullptr, kAlice);
  ASSERT_TRUE(alice.ok()) << alice.status();
  Client alice_client(**alice);
  (*alice)->Start();
  std::vector<uint64_t> alice_got;
  auto read_alice = [&](int batches) {
    for (int k = 0; k < batches; ++k) {
      absl::StatusOr<Batch> b = alice_client.Read();
      ASSERT_TRUE(b.ok()) << b.status();
      alice_got.push_back(b->checksum);
    }
  };
  read_alice(2 * kBatches);
  // Her ring full: she looks nothing up while Bob reads (so her pictures
  // are the least recently used, as a paused job's are).
  for (v1::SessionStats a = (*alice)->Stats(); a.ring_ready() < a.ring_slots();
       a = (*alice)->Stats()) {
    absl::SleepFor(absl::Milliseconds(1));  // Polling the ring's counter.
  }
  ASSERT_EQ((*alice)->Stats().pixel_mode(), v1::PIXEL_MODE_KEPT);
  ASSERT_EQ(shared.pixels.decodes(), uint64_t{kSamples});
  ASSERT_EQ(shared.ram.Stats().evictions(), 0u);

  EXPECT_EQ(Epochs(train + "}", bob_src, ".png", kSamples, 3, &shared, &stats, 2, kBob),
            bob_want);
  EXPECT_EQ(stats.pixel_mode(), v1::PIXEL_MODE_KEPT) << stats.pixel_cache_why();
  EXPECT_EQ(shared.pixels.decodes(), uint64_t{2 * kSamples});  // Bob's, once each.
  const v1::SessionStats alice_stats = (*alice)->Stats();
  EXPECT_EQ(alice_stats.pixel_mode(), v1::PIXEL_MODE_PARTLY_KEPT);
  EXPECT_NE(alice_stats.pixel_cache_why().find("another user's share"), std::string::npos)
      << alice_stats.pixel_cache_why();
  EXPECT_GT(shared.ram.Stats().evictions(), 0u);  // Alice's, to make Bob's room.

  // Bob gone, Alice asks again: kept, her evicted pictures decoded again.
  read_alice(2 * kBatches);
  EXPECT_EQ(alice_got, alice_want);
  EXPECT_EQ((*alice)->Stats().pixel_mode(), v1::PIXEL_MODE_KEPT);
  EXPECT_GT(shared.pixels.decodes(), uint64_t{2 * kSamples});
}

// Two users reading one dataset: the second finds the first's pictures
// kept and joins its claim (nothing decoded again, nothing more charged),
// even where the dataset is over its own share.
TEST(ServingSessionTest, AnotherUserReadingTheSameDatasetUsesItsPictures) {
  constexpr int kSamples = 20;
  auto src = Pngs(kSamples);
  const std::string train = R"({"transform": "TRANSFORM_TRAIN", "image_size": 24,
      "dtype": "DTYPE_UINT8", "batch_size": 4, "shuffle": true, "seed": 5)";
  Shared off(2);
  v1::SessionStats stats;
  const std::vector<uint64_t> want = Epochs(train + R"(, "pixel_cache": {"off": true}})", src,
                                            ".png", kSamples, 2, &off, &stats);
  // Room for the pictures (about 250 KiB), not for them in half of it.
  Shared shared(2, 300 << 10);
  auto alice = Open(train + "}", MemoryDataset(src, Files(kSamples, ".png")), &shared, 1,
                    nullptr, 1001);
  ASSERT_TRUE(alice.ok()) << alice.status();
  Client alice_client(**alice);
  (*alice)->Start();
  for (int k = 0; k < kSamples / 4; ++k) ASSERT_TRUE(alice_client.Read().ok());
  ASSERT_EQ((*alice)->Stats().pixel_mode(), v1::PIXEL_MODE_KEPT)
      << (*alice)->Stats().pixel_cache_why();
  const uint64_t decoded = shared.pixels.decodes();
  EXPECT_EQ(Epochs(train + "}", src, ".png", kSamples, 2, &shared, &stats, 2, 1002), want);
  EXPECT_EQ(stats.pixel_mode(), v1::PIXEL_MODE_KEPT) << stats.pixel_cache_why();
  EXPECT_EQ(shared.pixels.decodes(), decoded);
}

// A field that carries the file as stored still gets it when every
// picture is kept (the test's client sums its "raw" field's length and
// file bytes only).
TEST(ServingSessionTest, EncodedFieldsGetTheirFilesWhenThePicturesAreKept) {
  constexpr int kSamples = 8;
  auto src = Pngs(kSamples);
  const std::string fields = R"({"batch_size": 4, "shuffle": true, "seed": 5,
      "fields": [{"name": "image", "kind": "KIND_IMAGE", "shape": [24, 24, 3]},
                 {"name": "raw", "kind": "KIND_ENCODED", "shape": [65540]}],
      "pipeline": [{"resize": {"mode": "MODE_EXACT", "width": 24, "height": 24}},
                   {"flip": {}}])";
  Shared off_shared(2);
  v1::SessionStats stats;
  const std::vector<uint64_t> want = Epochs(fields + R"(, "pixel_cache": {"off": true}})",
                                            src, ".png", kSamples, 2, &off_shared, &stats);
  for (const char* cache : {"}", R"(, "pixel_cache": {"max_side": 16384}})"}) {
    Shared shared(2);
    EXPECT_EQ(Epochs(fields + cache, src, ".png", kSamples, 2, &shared, &stats), want) << cache;
    EXPECT_EQ(shared.pixels.decodes(), uint64_t{kSamples}) << cache;
  }
}

TEST(ServingSessionTest, PicturesThatDoNotFitAreNotKeptAndTheBatchesStayTheSame) {
  constexpr int kSamples = 40;
  auto src = Pngs(kSamples);  // About 3-18 KiB each decoded: over 64 KiB.
  const std::string train = R"({"transform": "TRANSFORM_TRAIN", "image_size": 24,
      "dtype": "DTYPE_UINT8", "batch_size": 4, "shuffle": true, "seed": 5)";
  Shared off_shared(2), small(2, 64 << 10);
  v1::SessionStats off_stats, stats;
  const std::vector<uint64_t> want = Epochs(train + R"(, "pixel_cache": {"off": true}})", src,
                                            ".png", kSamples, 2, &off_shared, &off_stats);
  const std::vector<uint64_t> got = Epochs(train + "}", src, ".png", kSamples, 2, &small, &stats);
  EXPECT_EQ(got, want);
  EXPECT_EQ(stats.pixel_mode(), v1::PIXEL_MODE_NOT_KEPT);
  EXPECT_NE(stats.pixel_cache_why().find("--pixel-cache-bytes 0.1 MiB"), std::string::npos)
      << stats.pixel_cache_why();
  // Measured on the first pictures, then nothing more decoded for the
  // cache (but what the 2 decode threads had begun).
  EXPECT_GE(small.pixels.decodes(), PixelKeeper::kFirstEstimate);
  EXPECT_LE(small.pixels.decodes(), PixelKeeper::kFirstEstimate + 2);
  EXPECT_EQ(small.shares.claimed(), 0u);
}

}  // namespace
}  // namespace stoker
