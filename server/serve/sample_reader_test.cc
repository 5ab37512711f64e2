// SampleReader over an in-memory source and an in-memory slot: which files
// are read, what each cache serves and keeps, and the errors' words.
#include "server/serve/sample_reader.h"

#include <cstring>

#include "gtest/gtest.h"
#include "server/dataset/memory_source.h"
#include "server/serve/serving_testing.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

constexpr char kVal[] = R"({"transform": "TRANSFORM_VAL", "image_size": 32, "dtype": "DTYPE_UINT8"})";
constexpr char kTrain[] =
    R"({"transform": "TRANSFORM_TRAIN", "image_size": 32, "dtype": "DTYPE_UINT8"})";

std::string Jpeg(int w, int h, uint64_t seed) {
  absl::StatusOr<std::string> j =
      testdata::EncodeJpeg(testdata::PhotoLikeRgb(w, h, seed), w, h, 90);
  EXPECT_TRUE(j.ok());
  return *j;
}

// The daemon's caches, small: L1 keeps nothing, so every fetch that
// reaches the fetcher reads the source.
// `in_flight` and `decode_room` (may be null) are the budgets of bytes read
// and of large decodes in flight, and `owner` whose the session's reads and
// decodes are.
struct Caches {
  explicit Caches(uint64_t decoded_bytes = 64 << 20, MemoryBudget* in_flight = nullptr,
                  int64_t owner = L2Cache::kNobody, MemoryBudget* decode_room = nullptr)
      : decoded("decoded", decoded_bytes),
        fetcher(&l1, nullptr, 1, in_flight),
        owner(owner),
        decode_room(decode_room) {}
  ShardedLruCache l1{"l1", 0};
  ShardedLruCache decoded;
  ShardedLruCache ram{"pixels", 64 << 20};
  SampleFetcher fetcher;
  PixelCache pixels{&ram, nullptr};
  int64_t owner;
  MemoryBudget* decode_room;
  ReaderCaches caches() {
    return {&fetcher, &decoded, &pixels, nullptr, DecodeLimits{}, owner, decode_room};
  }
};

struct Reader {
  Reader(const std::string& json, std::shared_ptr<Dataset> ds, Caches* c, int max_side = 0)
      : dataset(std::move(ds)),
        pipeline(PipelineOf(json)),
        bytes(FieldBytesOf(pipeline)),
        reader(*dataset, pipeline, 7, max_side, bytes, c->caches()) {}
  std::shared_ptr<Dataset> dataset;
  Pipeline pipeline;
  std::vector<uint64_t> bytes;
  SampleReader reader;
};

TEST(SampleReaderTest, FetchesEveryFileAndNamesTheOneThatFails) {
  auto src = std::make_shared<MemorySource>("root");
  src->Put("a0.jpg", Jpeg(64, 48, 1));
  src->Put("m0.png", "mask bytes");
  src->Put("a1.jpg", Jpeg(64, 48, 2));
  Caches c;
  Reader r(R"({"fields": [{"name": "image", "kind": "image", "shape": [32, 32, 3]},
                          {"name": "mask", "kind": "mask", "shape": [32, 32], "file": 1},
                          {"name": "label", "kind": "label", "dtype": "int32"}],
               "pipeline": [{"resize": {"size": 32}}, {"center_crop": {"width": 32, "height": 32}}]})",
           MemoryDataset(src, {{"a0.jpg", "m0.png"}, {"a1.jpg", "gone.png"}, {"nope.jpg", "m0.png"}}),
           &c);
  MemorySlot slot(r.bytes);
  FetchedSample in;
  SampleReader::Result got = r.reader.Read(0, 0, slot.out, &in);
  ASSERT_EQ(got.kind, SampleReader::Result::kDecode) << got.error;
  ASSERT_EQ(in.files.size(), 2u);
  EXPECT_EQ(*in.files[1], "mask bytes");
  EXPECT_EQ(src->reads(), 2);

  FetchedSample in1;
  got = r.reader.Read(1, 0, slot.out, &in1);
  EXPECT_EQ(got.kind, SampleReader::Result::kReadError);
  EXPECT_EQ(got.error.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(got.error.message(), "gone.png: no such file");
  // The sample's first file is the sample's name, which the error log adds.
  FetchedSample in2;
  got = r.reader.Read(2, 0, slot.out, &in2);
  EXPECT_EQ(got.kind, SampleReader::Result::kReadError);
  EXPECT_EQ(got.error.message(), "no such file");
  EXPECT_EQ(src->reads(), 2);  // Every file is identified before any is read.
  EXPECT_EQ(slot.fields[0], std::vector<uint8_t>(r.bytes[0], 0xAB));  // Nothing written.
}

TEST(SampleReaderTest, KeepsFinishedSamplesOnlyWhenTheEpochFits) {
  auto src = std::make_shared<MemorySource>("root");
  src->Put("a.jpg", Jpeg(64, 48, 1));
  src->Put("b.jpg", Jpeg(64, 48, 2));
  auto ds = MemoryDataset(src, {{"a.jpg"}, {"b.jpg"}});
  Caches c;
  Reader val(kVal, ds, &c);
  ASSERT_TRUE(val.reader.KeepsDecoded());
  EXPECT_EQ(val.reader.DecodedBytes(), 32u * 32 * 3);  // The image; labels are the session's.

  MemorySlot slot(val.bytes);
  FetchedSample in;
  ASSERT_EQ(val.reader.Read(0, 0, slot.out, &in).kind, SampleReader::Result::kDecode);
  EXPECT_FALSE(in.decoded_key.empty());
  val.reader.KeepDecoded(in, std::make_shared<std::string>(val.reader.DecodedBytes(), '\x07'),
                         slot.out);
  EXPECT_EQ(slot.fields[0], std::vector<uint8_t>(32 * 32 * 3, 7));
  const int reads = src->reads();

  // The next epoch's read is served whole, without a fetch.
  MemorySlot again(val.bytes);
  FetchedSample in2;
  ASSERT_EQ(val.reader.Read(0, 1, again.out, &in2).kind, SampleReader::Result::kDone);
  EXPECT_EQ(again.fields[0], std::vector<uint8_t>(32 * 32 * 3, 7));
  EXPECT_EQ(again.fields[1], std::vector<uint8_t>(val.bytes[1], 0xAB));
  EXPECT_TRUE(in2.files.empty());
  EXPECT_EQ(src->reads(), reads);

  // A session that has not read the file itself yet (an object store
  // session's first sight of an object) is not served the kept sample: it
  // reads the file, and is served from then on.
  src->ProveByReading();
  Reader other(kVal, ds, &c);
  MemorySlot fresh(val.bytes);
  FetchedSample in_other;
  ASSERT_EQ(other.reader.Read(0, 2, fresh.out, &in_other).kind,
            SampleReader::Result::kDecode);
  EXPECT_EQ(in_other.files.size(), 1u);
  EXPECT_EQ(src->reads(), reads + 1);
  FetchedSample in_proven;
  ASSERT_EQ(other.reader.Read(0, 3, fresh.out, &in_proven).kind, SampleReader::Result::kDone);
  EXPECT_EQ(src->reads(), reads + 1);

  // Two samples of 3072 bytes do not fit 4 KiB: nothing is kept.
  Caches small(4096);
  Reader tight(kVal, ds, &small);
  EXPECT_FALSE(tight.reader.KeepsDecoded());
  // A random pipeline's output is not a function of the file.
  Reader train(kTrain, ds, &c);
  EXPECT_FALSE(train.reader.KeepsDecoded());
  FetchedSample in3;
  ASSERT_EQ(train.reader.Read(0, 0, slot.out, &in3).kind, SampleReader::Result::kDecode);
  EXPECT_TRUE(in3.decoded_key.empty());
}

// A kept sample belongs to one file version of one source, read by one
// pipeline: another root's file of the same name, the file rewritten, or
// another output size are read afresh.
TEST(SampleReaderTest, AKeptSampleServesOnlyItsSourceFileVersionAndPipeline) {
  const std::string bytes = Jpeg(64, 48, 1);
  auto root_a = std::make_shared<MemorySource>("root-a");
  auto root_b = std::make_shared<MemorySource>("root-b");
  root_a->Put("a.jpg", bytes);
  root_b->Put("a.jpg", bytes);
  Caches c;
  Reader a(kVal, MemoryDataset(root_a, {{"a.jpg"}}), &c);
  MemorySlot slot(a.bytes);
  FetchedSample in;
  ASSERT_EQ(a.reader.Read(0, 0, slot.out, &in).kind, SampleReader::Result::kDecode);
  a.reader.KeepDecoded(in, std::make_shared<std::string>(a.reader.DecodedBytes(), '\x07'),
                       slot.out);
  FetchedSample hit;
  ASSERT_EQ(a.reader.Read(0, 0, slot.out, &hit).kind, SampleReader::Result::kDone);

  Reader b(kVal, MemoryDataset(root_b, {{"a.jpg"}}), &c);
  FetchedSample other_root;
  EXPECT_EQ(b.reader.Read(0, 0, slot.out, &other_root).kind, SampleReader::Result::kDecode);

  Reader bigger(R"({"transform": "TRANSFORM_VAL", "image_size": 48, "dtype": "DTYPE_UINT8"})",
                MemoryDataset(root_a, {{"a.jpg"}}), &c);
  MemorySlot big_slot(bigger.bytes);
  FetchedSample other_pipeline;
  EXPECT_EQ(bigger.reader.Read(0, 0, big_slot.out, &other_pipeline).kind,
            SampleReader::Result::kDecode);

  root_a->Put("a.jpg", bytes, /*mtime=*/2);
  FetchedSample rewritten;
  EXPECT_EQ(a.reader.Read(0, 0, slot.out, &rewritten).kind, SampleReader::Result::kDecode);
}

TEST(SampleReaderTest, WithAPixelCacheOnlyMissingPicturesAreFetched) {
  auto src = std::make_shared<MemorySource>("root");
  src->Put("a.jpg", Jpeg(200, 150, 1));
  Caches c;
  Reader r(kTrain, MemoryDataset(src, {{"a.jpg"}}), &c, /*max_side=*/64);
  MemorySlot slot(r.bytes);
  FetchedSample miss;
  ASSERT_EQ(r.reader.Read(0, 0, slot.out, &miss).kind, SampleReader::Result::kDecode);
  ASSERT_EQ(miss.pictures.size(), 2u);
  EXPECT_EQ(miss.pictures[0].entry, nullptr);
  ASSERT_EQ(miss.files.size(), 1u);
  EXPECT_EQ(src->reads(), 1);

  int planned_w = 0, planned_h = 0;
  auto plan = [&](int w, int h) {
    planned_w = w;
    planned_h = h;
    return RegionRequest{8, PixelRect{0, 0, w, h}, false};
  };
  Image image;
  Bytes entry;
  ImageView view;
  ASSERT_TRUE(r.reader.Picture(0, miss, plan, &image, &entry, &view).ok());
  EXPECT_EQ(c.pixels.decodes(), 1u);
  EXPECT_EQ(planned_w, 64);  // The geometry is drawn at the kept size.
  EXPECT_EQ(planned_h, 48);
  EXPECT_EQ(view.width, 64);
  EXPECT_EQ(view.height, 48);

  FetchedSample hit;
  ASSERT_EQ(r.reader.Read(0, 1, slot.out, &hit).kind, SampleReader::Result::kDecode);
  ASSERT_NE(hit.pictures[0].entry, nullptr);
  EXPECT_TRUE(hit.files.empty());
  EXPECT_EQ(src->reads(), 1);
  ImageView cached;
  ASSERT_TRUE(r.reader.Picture(0, hit, plan, &image, &entry, &cached).ok());
  EXPECT_EQ(c.pixels.decodes(), 1u);
  EXPECT_EQ(0, std::memcmp(cached.pixels, view.pixels, 64 * 48 * 3));
}

TEST(SampleReaderTest, WithoutAPixelCachePicturesAreDecodedAsPlanned) {
  auto src = std::make_shared<MemorySource>("root");
  src->Put("a.jpg", Jpeg(200, 150, 1));
  Caches c;
  Reader r(kTrain, MemoryDataset(src, {{"a.jpg"}}), &c);
  MemorySlot slot(r.bytes);
  FetchedSample in;
  ASSERT_EQ(r.reader.Read(0, 0, slot.out, &in).kind, SampleReader::Result::kDecode);
  EXPECT_TRUE(in.pictures.empty());
  Image image;
  Bytes entry;
  ImageView view;
  // A quarter-scale decode.
  ASSERT_TRUE(r.reader
                  .Picture(0, in,
                           [](int w, int h) {
                             EXPECT_EQ(w, 200);
                             EXPECT_EQ(h, 150);
                             return RegionRequest{2, PixelRect{0, 0, w, h}, false};
                           },
                           &image, &entry, &view)
                  .ok());
  EXPECT_EQ(entry, nullptr);
  EXPECT_EQ(view.scaled_width, 50);
  EXPECT_EQ(view.scaled_height, 38);
  EXPECT_EQ(c.pixels.decodes(), 0u);
}

// A read file's bytes stay charged to the session's user among the bytes
// in flight until the decode stage drops them. A picture whose decode needs
// more than a thread keeps is charged among the decodes in flight until it
// is done with; one larger than that whole budget fails by name, and
// nothing stays charged.
TEST(SampleReaderTest, ReadBytesAndLargeDecodesAreChargedToTheirUser) {
  auto src = std::make_shared<MemorySource>("root");
  const std::string big = Jpeg(2600, 2400, 3);  // 18.7 MB of pixels.
  src->Put("big.jpg", big);
  for (const uint64_t total : {uint64_t{64} << 20, uint64_t{8} << 20}) {
    MemoryBudget in_flight(64 << 20, 32 << 20), decodes(total, total / 2);
    Caches c(64 << 20, &in_flight, 1001, &decodes);
    Reader r(kVal, MemoryDataset(src, {{"big.jpg"}}), &c);
    MemorySlot slot(r.bytes);
    auto in = std::make_unique<FetchedSample>();
    ASSERT_EQ(r.reader.Read(0, 0, slot.out, in.get()).kind, SampleReader::Result::kDecode);
    EXPECT_EQ(in_flight.used_by(1001), big.size());  // Waiting for its decode.
    Image image;
    Bytes entry;
    ImageView view;
    absl::Status s = r.reader.Picture(
        0, *in, [](int w, int h) { return RegionRequest{8, PixelRect{0, 0, w, h}, false}; },
        &image, &entry, &view);
    if (total == (uint64_t{8} << 20)) {
      EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
      EXPECT_NE(s.message().find("its decode"), std::string::npos) << s;
      EXPECT_NE(s.message().find("--max-decode-bytes-in-flight"), std::string::npos) << s;
    } else {
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_GE(decodes.used_by(1001), uint64_t{2600} * 2400 * 3);
      DoneWith(&image);
    }
    EXPECT_EQ(decodes.used(), 0u);
    in.reset();  // The decode stage is done with the sample.
    EXPECT_EQ(in_flight.used(), 0u);
  }
}

TEST(SampleReaderTest, ArraysAreCopiedIntoTheSlotWithoutADecodeStage) {
  auto rows = std::make_shared<MemoryArrays>(5, 16, std::vector<size_t>{3});
  absl::StatusOr<Dataset> ds = ArrayDataset(rows, "rows");
  ASSERT_TRUE(ds.ok()) << ds.status();
  auto dataset = std::make_shared<Dataset>(*std::move(ds));
  Caches c;
  Reader r(R"({"fields": [{"name": "x", "kind": "array", "dtype": "float32", "shape": [16]},
                          {"name": "label", "kind": "label", "dtype": "int32"}]})",
           dataset, &c);
  EXPECT_FALSE(r.reader.KeepsDecoded());
  MemorySlot slot(r.bytes);
  FetchedSample in;
  SampleReader::Result got = r.reader.Read(2, 0, slot.out, &in);
  ASSERT_EQ(got.kind, SampleReader::Result::kDone) << got.error;
  std::vector<float> row(16);
  std::memcpy(row.data(), slot.fields[0].data(), 64);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(row[j], 2000.0f + j);
  EXPECT_EQ(slot.fields[1], std::vector<uint8_t>(r.bytes[1], 0xAB));  // Labels: the session's.

  got = r.reader.Read(3, 0, slot.out, &in);  // A file that is not an array.
  EXPECT_EQ(got.kind, SampleReader::Result::kReadError);
  EXPECT_EQ(got.error.message(), "rows[3]: not an array");

  // A sample the field does not fit is the sample's decode error.
  Reader wide(R"({"fields": [{"name": "x", "kind": "array", "dtype": "float32", "shape": [32]}]})",
              dataset, &c);
  MemorySlot wide_slot(wide.bytes);
  got = wide.reader.Read(0, 0, wide_slot.out, &in);
  EXPECT_EQ(got.kind, SampleReader::Result::kDecodeError);
  EXPECT_EQ(got.error.code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace stoker
