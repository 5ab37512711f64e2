// ServingSession over in-memory sources and its own ring, read the way a
// client reads it: batches in plan order across epochs, the same bytes for
// any pool size, failed samples replaced or zeroed as the spec says, the
// admission check before any allocation, and Stop with reads in flight.
#include "server/serve/session.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/dataset/memory_source.h"
#include "server/pool/topology.h"
#include "server/serve/serving_testing.h"
#include "tests/testdata.h"
#include "util/checksum.h"

namespace stoker {
namespace {

constexpr char kVal[] = R"({"transform": "TRANSFORM_VAL", "image_size": 24,
                           "dtype": "DTYPE_UINT8", "batch_size": 4})";

// What sessions share (the daemon's Engine, small): a reader pool, one
// unpinned decode pool of `threads`, the caches.
struct Shared {
  explicit Shared(int threads, uint64_t pixel_bytes = 64 << 20)
      : ram("pixels", pixel_bytes, 4),
        shares(pixel_bytes),
        decode("t-dec", Topology::Single(), false, threads, false) {}
  ShardedLruCache l1{"l1", 64 << 20};
  ShardedLruCache decoded{"decoded", 64 << 20};
  ShardedLruCache ram;
  PixelShares shares;
  SampleFetcher fetcher{&l1, nullptr, 4};
  PixelCache pixels{&ram, nullptr};
  PipelineCounters counters;
  SampleErrorLog errors;
  IdleWork idle;
  ThreadPool reader{"t-io", 4};
  NodePools decode;
  PipelineContext Context() {
    return PipelineContext{&reader, &decode, 0, &fetcher, &decoded, &pixels, &counters,
                           &errors, 1, DecodeLimits{}, &idle, -1, &shares};
  }
};

absl::StatusOr<std::unique_ptr<ServingSession>> Open(
    const std::string& json, std::shared_ptr<const Dataset> ds, Shared* shared, uint64_t id,
    const std::function<absl::Status(uint64_t)>& admit = nullptr, int64_t uid = -1) {
  const v1::SessionSpec spec = SpecOf(json);
  PlanSpec ps;
  ps.num_samples = ds->samples.size();
  ps.batch_size = spec.batch_size();
  ps.shuffle = spec.shuffle();
  ps.seed = spec.seed();
  absl::StatusOr<EpochPlan> plan = EpochPlan::Create(ps);
  if (!plan.ok()) return plan.status();
  PipelineContext ctx = shared->Context();
  ctx.uid = uid;
  return ServingSession::Create(id, spec, PipelineOf(json), getpid(), std::move(ds), *plan,
                                absl::StrCat("stoker-session-test.", getpid(), ".", id),
                                ctx, admit);
}

// One batch as the client sees it.
struct Batch {
  uint64_t epoch = 0, batch_index = 0;
  uint32_t samples = 0, errors = 0;
  std::vector<uint64_t> indices;
  std::vector<uint32_t> status;
  uint64_t checksum = 0;  // Of every field's bytes of its samples.
};

// The session's ring mapped as a client maps it; Read takes the next
// batch (waiting for it) and gives its slot back.
class Client {
 public:
  explicit Client(const ServingSession& s) {
    absl::StatusOr<int> fd = s.ring().Share();
    EXPECT_TRUE(fd.ok()) << fd.status();
    auto ring = shm::RingConsumer::Open(*fd, s.ring().name(), s.id());
    close(*fd);
    EXPECT_TRUE(ring.ok()) << ring.status();
    ring_ = *std::move(ring);
  }
  absl::StatusOr<Batch> Read(absl::Duration timeout = absl::Seconds(60)) {
    shm::SlotSnapshot snap;
    absl::StatusOr<int> slot = ring_->Acquire(next_, timeout, nullptr, &snap);
    if (!slot.ok()) return slot.status();
    ++next_;
    const shm::SlotView v = ring_->Slot(*slot);
    Batch b;
    b.epoch = snap.epoch;
    b.batch_index = snap.batch_index;
    b.samples = snap.sample_count;
    b.errors = snap.error_count;
    b.indices.assign(v.indices, v.indices + b.samples);
    b.status.assign(v.status, v.status + b.samples);
    Checksum sum;
    for (uint32_t f = 0; f < ring_->layout().field_count; ++f) {
      const uint64_t n = ring_->layout().fields[f].sample_bytes;
      if (std::string(ring_->layout().fields[f].name) != "raw") {
        sum.Update(v.fields[f], b.samples * n);
        continue;
      }
      // An encoded field: its length, then that many bytes of the file (the
      // rest of the slot is whatever it held).
      for (uint32_t i = 0; i < b.samples; ++i) {
        const uint8_t* p = v.fields[f] + i * n;
        uint32_t len = 0;
        std::memcpy(&len, p, 4);
        sum.Update(p, 4 + std::min<uint64_t>(len, n - 4));
      }
    }
    b.checksum = sum.value();
    ring_->Release(*slot);
    return b;
  }
  uint32_t close_reason() const { return ring_->close_reason(); }

 private:
  std::unique_ptr<shm::RingConsumer> ring_;
  uint64_t next_ = 0;
};

// `n` photo-like JPEGs, "p<i>.jpg", of differing sizes.
std::shared_ptr<MemorySource> Photos(int n) {
  auto src = std::make_shared<MemorySource>("root");
  for (int i = 0; i < n; ++i) {
    const int w = 40 + 4 * i, h = 32 + 2 * i;
    absl::StatusOr<std::string> j =
        testdata::EncodeJpeg(testdata::PhotoLikeRgb(w, h, 100 + i), w, h, 90);
    EXPECT_TRUE(j.ok());
    src->Put(absl::StrCat("p", i, ".jpg"), *j);
  }
  return src;
}

// The same pictures as PNGs, "p<i>.png".
std::shared_ptr<MemorySource> Pngs(int n) {
  auto src = std::make_shared<MemorySource>("root");
  for (int i = 0; i < n; ++i) {
    const int w = 40 + 4 * i, h = 32 + 2 * i;
    absl::StatusOr<std::string> p = testdata::EncodePng(
        testdata::PhotoLikeRgb(w, h, 100 + i), w, h, testdata::PngKind::kRgb8);
    EXPECT_TRUE(p.ok());
    src->Put(absl::StrCat("p", i, ".png"), *p);
  }
  return src;
}

std::vector<std::vector<std::string>> Files(int n, const char* suffix = ".jpg") {
  std::vector<std::vector<std::string>> files;
  for (int i = 0; i < n; ++i) files.push_back({absl::StrCat("p", i, suffix)});
  return files;
}

// Checksums of `epochs` epochs of `json` over `src`, and the session's
// stats at the end (session `id` of `uid`).
std::vector<uint64_t> Epochs(const std::string& json, std::shared_ptr<MemorySource> src,
                             const char* suffix, int n, int epochs, Shared* shared,
                             v1::SessionStats* stats, uint64_t id = 1, int64_t uid = -1) {
  auto s = Open(json, MemoryDataset(src, Files(n, suffix)), shared, id, nullptr, uid);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return {};
  Client client(**s);
  (*s)->Start();
  std::vector<uint64_t> sums;
  const int batches = epochs * ((n + 3) / 4);
  for (int k = 0; k < batches; ++k) {
    absl::StatusOr<Batch> b = client.Read();
    EXPECT_TRUE(b.ok()) << b.status();
    if (!b.ok()) break;
    sums.push_back(b->checksum);
  }
  *stats = (*s)->Stats();
  return sums;
}

TEST(ServingSessionTest, BatchesComeInPlanOrderAcrossEpochs) {
  Shared shared(2);
  auto s = Open(kVal, MemoryDataset(Photos(10), Files(10)), &shared, 1);
  ASSERT_TRUE(s.ok()) << s.status();
  Client client(**s);
  (*s)->Start();
  // 10 samples in batches of 4: 4, 4, 2, then epoch 1 the same.
  for (uint64_t seq = 0; seq < 6; ++seq) {
    absl::StatusOr<Batch> b = client.Read();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->epoch, seq / 3);
    EXPECT_EQ(b->batch_index, seq % 3);
    ASSERT_EQ(b->samples, seq % 3 == 2 ? 2u : 4u);
    EXPECT_EQ(b->errors, 0u);
    for (uint32_t i = 0; i < b->samples; ++i) {
      EXPECT_EQ(b->indices[i], (seq % 3) * 4 + i);  // No shuffle: identity order.
      EXPECT_EQ(b->status[i], shm::kSampleOk);
    }
  }
  EXPECT_GE((*s)->samples_decoded(), 20u);
  const v1::SessionStats stats = (*s)->Stats();
  EXPECT_GE(stats.batches_published(), 6u);
  EXPECT_EQ(stats.samples_failed(), 0u);
}

TEST(ServingSessionTest, TheBytesDoNotDependOnThePoolsOrTheCaches) {
  const std::string train = R"({"transform": "TRANSFORM_TRAIN", "image_size": 24,
                                "dtype": "DTYPE_UINT8", "batch_size": 4, "shuffle": true,
                                "seed": 11})";
  std::vector<uint64_t> want;
  for (int threads : {1, 3}) {
    Shared shared(threads);
    auto src = Photos(9);
    std::vector<uint64_t> got;
    // Twice over the same shared caches: the second session reads L1.
    for (uint64_t id : {1, 2}) {
      auto s = Open(train, MemoryDataset(src, Files(9)), &shared, id);
      ASSERT_TRUE(s.ok()) << s.status();
      Client client(**s);
      (*s)->Start();
      std::vector<uint64_t> sums;
      for (int k = 0; k < 6; ++k) {  // Two epochs.
        absl::StatusOr<Batch> b = client.Read();
        ASSERT_TRUE(b.ok()) << b.status();
        sums.push_back(b->checksum);
      }
      (*s)->Stop(shm::kClosedBySession);
      if (got.empty()) {
        got = sums;
      } else {
        EXPECT_EQ(sums, got) << "threads " << threads << ", session " << id;
      }
    }
    EXPECT_NE(got[0], got[3]) << "epoch 1 draws new crops";
    if (want.empty()) {
      want = got;
    } else {
      EXPECT_EQ(got, want) << "threads " << threads;
    }
  }
}

TEST(ServingSessionTest, FailedSamplesAreReplacedOrZeroedAsTheSpecSays) {
  auto src = Photos(8);
  std::vector<std::vector<std::string>> files = Files(8);
  files[5] = {"missing.jpg"};
  src->Put("broken.jpg", "not a picture");
  files[6] = {"broken.jpg"};
  for (const char* on_error : {"ON_ERROR_REPLACE", "ON_ERROR_ZEROS"}) {
    Shared shared(2);
    const std::string json = absl::StrCat(R"({"transform": "TRANSFORM_VAL", "image_size": 24,
        "dtype": "DTYPE_UINT8", "batch_size": 4, "on_error": ")", on_error, R"("})");
    auto s = Open(json, MemoryDataset(src, files), &shared, 1);
    ASSERT_TRUE(s.ok()) << s.status();
    Client client(**s);
    (*s)->Start();
    ASSERT_TRUE(client.Read().ok());
    absl::StatusOr<Batch> b = client.Read();  // Samples 4..7.
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_EQ(b->samples, 4u);
    EXPECT_EQ(b->errors, 2u) << on_error;
    EXPECT_EQ(b->indices[1], 5u);  // The failed sample's index, either way.
    EXPECT_EQ(b->indices[2], 6u);
    if (std::string(on_error) == "ON_ERROR_REPLACE") {
      EXPECT_EQ(b->status[1], shm::kSampleReplaced);
      EXPECT_EQ(b->status[2], shm::kSampleReplaced);
    } else {
      EXPECT_EQ(b->status[1], shm::kSampleReadError);
      EXPECT_EQ(b->status[2], shm::kSampleDecodeError);
    }
    EXPECT_EQ(b->status[0], shm::kSampleOk);
    EXPECT_EQ(b->status[3], shm::kSampleOk);
    // Counted where they failed (the producer may be an epoch ahead).
    EXPECT_GE(shared.counters.samples_failed_read.load(), 1u) << on_error;
    EXPECT_GE(shared.counters.samples_failed_decode.load(), 1u) << on_error;
  }
}

TEST(ServingSessionTest, AdmissionIsAskedBeforeTheRingExists) {
  Shared shared(1);
  uint64_t asked = 0;
  auto refused = Open(kVal, MemoryDataset(Photos(4), Files(4)), &shared, 7,
                      [&](uint64_t bytes) {
                        asked = bytes;
                        return absl::ResourceExhaustedError("over the quota");
                      });
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_GT(asked, 0u);
  // The same session admitted: its ring is the size that was asked about.
  auto s = Open(kVal, MemoryDataset(Photos(4), Files(4)), &shared, 7,
                [](uint64_t) { return absl::OkStatus(); });
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->ring().layout().segment_bytes, asked);
}

TEST(ServingSessionTest, StopWaitsForReadsInFlightAndTellsTheClient) {
  Shared shared(2);
  auto src = Photos(8);
  auto s = Open(kVal, MemoryDataset(src, Files(8)), &shared, 1);
  ASSERT_TRUE(s.ok()) << s.status();
  Client client(**s);
  src->Hold();  // Every read waits until Release.
  (*s)->Start();
  src->Holding().WaitForNotification();  // A read is in flight.
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    (*s)->Stop(shm::kClosedByShutdown);
    stopped = true;
  });
  // Stop cannot return while the read it waits for is held.
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(stopped.load());
  src->Release();
  stopper.join();
  const int reads = src->reads();
  absl::StatusOr<Batch> b;
  while ((b = client.Read(absl::Seconds(5))).ok()) {
  }
  EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable) << b.status();
  EXPECT_EQ(client.close_reason(), shm::kClosedByShutdown);
  EXPECT_EQ(src->reads(), reads);  // Nothing runs after Stop returned.
}

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
  auto src = std::make_shared<MemorySource>("root");
  for (int i = 0; i < kSamples; ++i) {
    const int w = 300 + 7 * i, h = 260 + 5 * i;
    absl::StatusOr<std::string> p = testdata::EncodePng(
        testdata::PhotoLikeRgb(w, h, 500 + i), w, h, testdata::PngKind::kRgb8);
    ASSERT_TRUE(p.ok());
    src->Put(absl::StrCat("p", i, ".png"), *p);
  }
  const std::string train = R"({"transform": "TRANSFORM_TRAIN", "image_size": 64,
      "dtype": "DTYPE_UINT8", "batch_size": 4, "shuffle": true, "seed": 9)";
  // 48 pictures of up to 0.9 MiB: room in every one of the LRU's 16
  // shards, so none is evicted and decoded again.
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
  auto pngs = [](const char* name, int w, int h, uint64_t seed) {
    auto src = std::make_shared<MemorySource>(name);
    for (int i = 0; i < kSamples; ++i) {
      absl::StatusOr<std::string> p = testdata::EncodePng(
          testdata::PhotoLikeRgb(w, h, seed + i), w, h, testdata::PngKind::kRgb8);
      EXPECT_TRUE(p.ok());
      src->Put(absl::StrCat("p", i, ".png"), *p);
    }
    return src;
  };
  auto alice_src = pngs("alice", 110, 100, 700);  // 24 x 33 KB: 0.76 MiB.
  auto bob_src = pngs("bob", 70, 70, 800);        // 24 x 14.7 KB: 0.34 MiB.
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
