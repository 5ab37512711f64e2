// SampleRenderer into an in-memory slot: the pixels it writes against the
// pipeline applied to a whole decode, the size rule, encoded fields, the
// decoded cache's private copy, and what it hands to a client.
#include "server/serve/sample_renderer.h"

#include <cstring>

#include "gtest/gtest.h"
#include "server/dataset/memory_source.h"
#include "server/serve/serving_testing.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

constexpr char kResize[] = R"({"fields": [
    {"name": "image", "kind": "image", "shape": [32, 32, 3]},
    {"name": "label", "kind": "label", "dtype": "int32"}],
    "pipeline": [{"random_resized_crop": {"width": 32, "height": 32}}, {"flip": {}}]})";

std::string Jpeg(int w, int h, uint64_t seed) {
  absl::StatusOr<std::string> j =
      testdata::EncodeJpeg(testdata::PhotoLikeRgb(w, h, seed), w, h, 90);
  EXPECT_TRUE(j.ok());
  return *j;
}

std::string Png(int w, int h, uint64_t seed, testdata::PngKind kind = testdata::PngKind::kRgb8) {
  absl::StatusOr<std::string> p = testdata::EncodePng(testdata::PhotoLikeRgb(w, h, seed), w, h, kind);
  EXPECT_TRUE(p.ok());
  return *p;
}

// A reader and a renderer over files in memory (no caches consulted but
// the fetcher's).
struct Stages {
  Stages(const std::string& json, std::vector<std::vector<std::string>> files)
      : src(std::make_shared<MemorySource>("root")),
        dataset(MemoryDataset(src, files)),
        pipeline(PipelineOf(json)),
        bytes(FieldBytesOf(pipeline)),
        reader(*dataset, pipeline, 7, 0, bytes,
               ReaderCaches{&fetcher, nullptr, nullptr, nullptr, DecodeLimits{}}),
        renderer(*dataset, pipeline, reader, 7, bytes, DecodeLimits{}) {}
  // Reads and renders sample `index` of `epoch` into `slot`.
  absl::Status Render(uint64_t index, uint64_t epoch, MemorySlot* slot, RenderCost* cost,
                      bool hand_over = false, uint8_t* spatial_out = nullptr) {
    FetchedSample in;
    SampleReader::Result r = reader.Read(index, epoch, slot->out, &in);
    EXPECT_EQ(r.kind, SampleReader::Result::kDecode) << r.error;
    return renderer.Render(index, epoch, hand_over, in, slot->out, spatial_out, cost);
  }
  ShardedLruCache l1{"l1", 0};
  SampleFetcher fetcher{&l1, nullptr, 1};
  std::shared_ptr<MemorySource> src;
  std::shared_ptr<Dataset> dataset;
  Pipeline pipeline;
  std::vector<uint64_t> bytes;
  SampleReader reader;
  SampleRenderer renderer;
};

// What the pipeline draws for (seed 7, epoch, index), written from a whole
// decode of `file` (a PNG: decoding a region of it gives the same pixels).
std::vector<uint8_t> Reference(const Pipeline& p, const std::string& file, uint64_t epoch,
                               uint64_t index, uint64_t bytes, int f = 0) {
  Image image;
  std::vector<Canvas> canvases;
  std::vector<Effects> effects;
  EXPECT_TRUE(DecodeImage(reinterpret_cast<const uint8_t*>(file.data()), file.size(),
                          p.Request(p.fields()[f], DecodeLimits{}),
                          [&](int w, int h) {
                            canvases = p.Plan(w, h, 7, epoch, index, &effects);
                            return RegionRequest{8, PixelRect{0, 0, w, h}, false};
                          },
                          &image)
                  .ok());
  std::vector<uint8_t> out(bytes);
  p.Write(p.fields()[f], canvases[f], image.view(), image.width, image.height, out.data(),
          &effects[f]);
  return out;
}

TEST(SampleRendererTest, WritesWhatThePipelineDrawsForTheSample) {
  const std::string png = Png(96, 64, 3);
  Stages s(kResize, {{"a.png"}});
  s.src->Put("a.png", png);
  for (uint64_t epoch : {0, 1, 2}) {
    MemorySlot slot(s.bytes);
    RenderCost cost;
    ASSERT_TRUE(s.Render(0, epoch, &slot, &cost).ok());
    EXPECT_EQ(slot.fields[0], Reference(s.pipeline, png, epoch, 0, s.bytes[0])) << epoch;
    EXPECT_EQ(slot.fields[1], std::vector<uint8_t>(s.bytes[1], 0xAB));  // Labels: the session's.
    EXPECT_FALSE(cost.handed_over);
  }
  // Another epoch draws another crop.
  MemorySlot e0(s.bytes), e1(s.bytes);
  RenderCost cost;
  ASSERT_TRUE(s.Render(0, 0, &e0, &cost).ok());
  ASSERT_TRUE(s.Render(0, 1, &e1, &cost).ok());
  EXPECT_NE(e0.fields[0], e1.fields[0]);
}

TEST(SampleRendererTest, JpegsAreDecodedAtTheScaleTheCropNeeds) {
  // A large JPEG resized to 32: the pixels are close to a whole decode's,
  // not equal (DCT scaling).
  const std::string jpeg = Jpeg(640, 480, 4);
  Stages s(R"({"transform": "TRANSFORM_VAL", "image_size": 32, "dtype": "DTYPE_UINT8"})",
           {{"a.jpg"}});
  s.src->Put("a.jpg", jpeg);
  MemorySlot slot(s.bytes);
  RenderCost cost;
  ASSERT_TRUE(s.Render(0, 0, &slot, &cost).ok());
  const std::vector<uint8_t> ref = Reference(s.pipeline, jpeg, 0, 0, s.bytes[0]);
  double sum = 0;
  for (size_t i = 0; i < ref.size(); ++i) sum += std::abs(int(slot.fields[0][i]) - int(ref[i]));
  EXPECT_LT(sum / ref.size(), 4.0);
}

TEST(SampleRendererTest, ThePicturesOfASampleMustBeOneSize) {
  Stages s(R"({"fields": [{"name": "image", "kind": "image", "shape": [32, 32, 3]},
                          {"name": "mask", "kind": "mask", "shape": [32, 32], "file": 1}],
               "pipeline": [{"random_resized_crop": {"width": 32, "height": 32}}]})",
           {{"a.png", "m.png"}, {"b.png", "n.png"}});
  s.src->Put("a.png", Png(64, 48, 1));
  s.src->Put("m.png", Png(40, 30, 2, testdata::PngKind::kGray8));
  s.src->Put("b.png", Png(64, 48, 1));
  s.src->Put("n.png", Png(64, 48, 2, testdata::PngKind::kGray8));
  MemorySlot slot(s.bytes);
  RenderCost cost;
  absl::Status bad = s.Render(0, 0, &slot, &cost);
  EXPECT_EQ(bad.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(bad.message(),
            "m.png: is 40x30 but the sample's first picture is 64x48: the fields of a sample "
            "must be the same size");
  const std::string image = Png(64, 48, 1);
  const std::string mask = Png(64, 48, 2, testdata::PngKind::kGray8);
  ASSERT_TRUE(s.Render(1, 0, &slot, &cost).ok());
  // Image and mask rendered with the sample's one draw.
  EXPECT_EQ(slot.fields[0], Reference(s.pipeline, image, 0, 1, s.bytes[0], 0));
  EXPECT_EQ(slot.fields[1], Reference(s.pipeline, mask, 0, 1, s.bytes[1], 1));
}

TEST(SampleRendererTest, EncodedFieldsGetTheirFileCountFirst) {
  Stages s(R"({"fields": [{"name": "raw", "kind": "encoded", "dtype": "uint8", "shape": [104]},
                          {"name": "label", "kind": "label", "dtype": "int32"}]})",
           {{"small.bin"}, {"big.bin"}});
  s.src->Put("small.bin", "0123456789");
  s.src->Put("big.bin", std::string(101, 'x'));
  MemorySlot slot(s.bytes);
  RenderCost cost;
  ASSERT_TRUE(s.Render(0, 0, &slot, &cost).ok());
  uint32_t n = 0;
  std::memcpy(&n, slot.fields[0].data(), 4);
  EXPECT_EQ(n, 10u);
  EXPECT_EQ(std::string(slot.fields[0].begin() + 4, slot.fields[0].begin() + 14), "0123456789");
  absl::Status big = s.Render(1, 0, &slot, &cost);
  EXPECT_EQ(big.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(big.message(), "is 101 bytes; field 'raw' holds at most 100");
}

TEST(SampleRendererTest, APrivateCopyLeavesTheSlotAlone) {
  const std::string png = Png(96, 64, 3);
  Stages s(kResize, {{"a.png"}});
  s.src->Put("a.png", png);
  MemorySlot slot(s.bytes);
  std::vector<uint8_t> copy(s.bytes[0]);
  RenderCost cost;
  ASSERT_TRUE(s.Render(0, 0, &slot, &cost, false, copy.data()).ok());
  EXPECT_EQ(copy, Reference(s.pipeline, png, 0, 0, s.bytes[0]));
  EXPECT_EQ(slot.fields[0], std::vector<uint8_t>(s.bytes[0], 0xAB));
}

float RecordSlot(const MemorySlot& slot, int field, RenderSlot which) {
  float v;
  std::memcpy(&v, slot.fields[field].data() + 4 * which, 4);
  return v;
}

TEST(SampleRendererTest, HandsTheClientTheJpegsItCanDecode) {
  Stages s(R"({"fields": [{"name": "image", "kind": "image", "dtype": "float32", "shape": [32, 32, 3]},
                          {"name": "label", "kind": "label", "dtype": "int32"}],
               "pipeline": [{"resize": {"size": 32}}, {"center_crop": {"width": 32, "height": 32}}],
               "client_decode": {"max_bytes": 1048576}})",
           {{"a.jpg"}, {"a.png"}, {"cut.jpg"}});
  const std::string jpeg = Jpeg(200, 150, 1);
  s.src->Put("a.jpg", jpeg);
  s.src->Put("a.png", Png(200, 150, 1));
  s.src->Put("cut.jpg", jpeg.substr(0, jpeg.size() - 200));
  const int jpeg_field = s.pipeline.fields()[0].client_jpeg;
  const int render_field = s.pipeline.fields()[0].client_render;
  ASSERT_GT(jpeg_field, 0);

  MemorySlot handed(s.bytes);
  RenderCost cost;
  ASSERT_TRUE(s.Render(0, 0, &handed, &cost, /*hand_over=*/true).ok());
  EXPECT_TRUE(cost.handed_over);
  uint32_t n = 0;
  std::memcpy(&n, handed.fields[jpeg_field].data(), 4);
  ASSERT_EQ(n, jpeg.size());
  EXPECT_EQ(0, std::memcmp(handed.fields[jpeg_field].data() + 4, jpeg.data(), n));
  EXPECT_EQ(RecordSlot(handed, render_field, kWhere), 1.0f);
  EXPECT_EQ(RecordSlot(handed, render_field, kSourceWidth), 200.0f);
  EXPECT_EQ(handed.fields[0], std::vector<uint8_t>(s.bytes[0], 0xAB));  // Not decoded.

  // The daemon's share: decoded, with an empty file and a record saying so.
  MemorySlot kept(s.bytes);
  RenderCost kept_cost;
  ASSERT_TRUE(s.Render(0, 0, &kept, &kept_cost, /*hand_over=*/false).ok());
  EXPECT_FALSE(kept_cost.handed_over);
  std::memcpy(&n, kept.fields[jpeg_field].data(), 4);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(RecordSlot(kept, render_field, kWhere), 0.0f);
  EXPECT_NE(kept.fields[0], std::vector<uint8_t>(s.bytes[0], 0xAB));

  // Not a JPEG, or a JPEG cut short: the daemon's, whatever the share.
  for (uint64_t index : {1, 2}) {
    MemorySlot slot(s.bytes);
    RenderCost c;
    (void)s.Render(index, 0, &slot, &c, /*hand_over=*/true);
    EXPECT_FALSE(c.handed_over) << index;
    std::memcpy(&n, slot.fields[jpeg_field].data(), 4);
    EXPECT_NE(n, 200u) << index;
  }
}

}  // namespace
}  // namespace stoker
