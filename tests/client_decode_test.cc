// Client decode (SessionSpec.client_decode): the daemon hands JPEGs over as
// their bytes plus a render record, and those reproduce the CPU path's
// pixels exactly when rendered with the daemon's own resampler; what a
// client cannot decode (CMYK, PNG, files over the limits) comes decoded;
// labels, indices and order never change; the split follows the share the
// client writes; encoded fields carry files as stored.
#include <cstring>
#include <filesystem>
#include <map>

#include "client/cpp/client.h"
#include "gtest/gtest.h"
#include "server/imaging/decode.h"
#include "server/imaging/geometry.h"
#include "server/pipeline/pipeline.h"
#include "server/imaging/transform.h"
#include "tests/harness.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

using testing::TestDaemon;
namespace fs = std::filesystem;

// One sample as a batch delivered it.
struct Delivered {
  uint64_t index = 0;
  int32_t label = 0;
  uint32_t status = 0;
  std::vector<uint8_t> image;
  std::string jpeg;                 // Empty: decoded by the daemon.
  std::vector<float> render;        // kRenderFloats, or empty.
  uint64_t epoch = 0;
};

class ClientDecodeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(testdata::MakeTempDir("client-decode"));
    files_ = new std::map<std::string, std::string>;
    using testdata::Subsampling;
    auto add = [](const std::string& name, const std::string& bytes) {
      const std::string path = *root_ + "/" + name;
      fs::create_directories(fs::path(path).parent_path());
      ASSERT_TRUE(testdata::WriteFile(path, bytes).ok());
      (*files_)[name] = bytes;
    };
    int k = 0;
    auto jpeg = [&](Subsampling sub, bool progressive) {
      const int w = 150 + 17 * k, h = 190 - 9 * k;
      ++k;
      return *testdata::EncodeJpeg(testdata::PhotoLikeRgb(w, h, k), w, h, 90, sub,
                                   progressive);
    };
    add("a/444.jpg", jpeg(Subsampling::k444, false));
    add("a/422.jpg", jpeg(Subsampling::k422, false));
    add("a/420.jpg", jpeg(Subsampling::k420, false));
    add("a/gray.jpg", jpeg(Subsampling::kGray, false));
    add("b/progressive.jpg", jpeg(Subsampling::k420, true));
    add("b/cmyk.jpg", *testdata::EncodeCmykJpeg(testdata::PhotoLikeRgb(170, 130, 9),
                                               170, 130, 90));
    add("b/png.png", *testdata::EncodePng(testdata::PhotoLikeRgb(120, 160, 10), 120,
                                          160, testdata::PngKind::kRgb8));
    add("b/big.jpg", *testdata::EncodeJpeg(testdata::PhotoLikeRgb(600, 500, 11), 600,
                                           500, 98, Subsampling::k444));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete root_;
    delete files_;
  }

  static v1::SessionSpec Spec(v1::Transform t = v1::TRANSFORM_TRAIN) {
    v1::SessionSpec s;
    s.mutable_dataset()->mutable_folder()->set_path(*root_);
    s.set_transform(t);
    s.set_batch_size(4);
    s.set_image_size(48);
    s.set_shuffle(true);
    s.set_seed(11);
    s.set_decode(v1::DECODE_FULL);
    return s;
  }
  // `max_bytes` 0: unset (the schema's default).
  static v1::SessionSpec ClientSpec(float share, uint32_t max_bytes = 0) {
    v1::SessionSpec s = Spec();
    s.mutable_client_decode()->set_cpu_share(share);
    if (max_bytes != 0) s.mutable_client_decode()->set_max_bytes(max_bytes);
    return s;
  }

  // The samples of `batches` batches, in order. `between` runs after each.
  static std::vector<Delivered> Read(Session& s, int batches,
                                     const std::function<void(int)>& between = nullptr) {
    std::vector<Delivered> out;
    for (int b = 0; b < batches; ++b) {
      auto batch = s.Next(absl::Seconds(30));
      EXPECT_TRUE(batch.ok()) << batch.status();
      if (!batch.ok()) return out;
      const int image = batch->FindField("image");
      const int jpeg = batch->FindField("image_jpeg");
      const int render = batch->FindField("image_render");
      for (uint32_t i = 0; i < batch->samples(); ++i) {
        Delivered d;
        d.index = batch->indices()[i];
        d.label = batch->labels()[i];
        d.status = batch->status()[i];
        d.epoch = batch->epoch();
        const BatchField img = batch->field(image);
        const auto* p = static_cast<const uint8_t*>(img.data) + i * img.sample_bytes;
        d.image.assign(p, p + img.sample_bytes);
        if (render >= 0) {
          const BatchField r = batch->field(render);
          const auto* rf = reinterpret_cast<const float*>(
              static_cast<const uint8_t*>(r.data) + i * r.sample_bytes);
          d.render.assign(rf, rf + kRenderFloats);
          const BatchField j = batch->field(jpeg);
          const auto* jp = static_cast<const uint8_t*>(j.data) + i * j.sample_bytes;
          uint32_t n;
          std::memcpy(&n, jp, 4);
          EXPECT_LE(n + 4, j.sample_bytes);
          if (d.render[0] == 1) d.jpeg.assign(reinterpret_cast<const char*>(jp + 4), n);
          else EXPECT_EQ(n, 0u);
        }
        out.push_back(std::move(d));
      }
      if (between) between(b);
    }
    return out;
  }
  static std::vector<Delivered> ReadSpec(TestDaemon& d, const v1::SessionSpec& spec,
                                         int batches) {
    auto s = d.Connect()->OpenSession(spec);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? Read(**s, batches) : std::vector<Delivered>{};
  }

  // Renders a handed-over sample with the daemon's resampler from its
  // bytes and record: the CPU path's pixels when decoded in full.
  static std::vector<uint8_t> RenderOnCpu(const Delivered& d, int size) {
    Image img;
    ImageRequest req;
    EXPECT_TRUE(DecodeImage(reinterpret_cast<const uint8_t*>(d.jpeg.data()), d.jpeg.size(),
                            req, [](int w, int h) {
                              return RegionRequest{8, PixelRect{0, 0, w, h}, false};
                            }, &img).ok());
    EXPECT_EQ(img.width, static_cast<int>(d.render[1]));
    EXPECT_EQ(img.height, static_cast<int>(d.render[2]));
    const std::vector<float>& r = d.render;
    EXPECT_EQ(r[3], 0);  // The presets' content fills the output.
    EXPECT_EQ(r[5], size);
    CropBox box{r[7], r[8], r[9], r[10], r[11] == 1};
    std::vector<uint8_t> out(size_t(size) * size * 3);
    Resample(img.pixels.data(), img.width, img.height, 3, 1, box, size, size,
             Filter::kBilinear, out.data());
    return out;
  }

  static int CountWhere(const std::vector<Delivered>& v, float where) {
    int n = 0;
    for (const Delivered& d : v) n += !d.render.empty() && d.render[0] == where;
    return n;
  }

  // Dataset index -> file name (relative to the folder).
  static std::vector<std::string> Names(TestDaemon& d) {
    auto s = d.Connect()->OpenSession(Spec());
    auto names = (*s)->DescribeSamples({0, 1, 2, 3, 4, 5, 6, 7});
    std::vector<std::string> out;
    for (const std::string& n : *names) out.push_back(fs::relative(n, *root_).string());
    return out;
  }

  inline static std::string* root_ = nullptr;
  inline static std::map<std::string, std::string>* files_ = nullptr;
};

TEST_F(ClientDecodeTest, HandsOverWhatAClientCanDecodeWithTheCpuPathsGeometry) {
  TestDaemon d(false, 2);
  const int kBatches = 6;  // 3 epochs of 8 samples.
  const std::vector<Delivered> ref = ReadSpec(d, Spec(), kBatches);
  // max_bytes 64 KiB: big.jpg (over 100 KB) stays the daemon's.
  auto session = d.Connect()->OpenSession(ClientSpec(0, 64 << 10));
  ASSERT_TRUE(session.ok()) << session.status();
  const std::vector<Delivered> got = Read(**session, kBatches);
  ASSERT_EQ(got.size(), ref.size());
  ASSERT_EQ(got.size(), 24u);
  const std::vector<std::string> names = Names(d);
  std::map<std::string, int> handed, decoded;
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i].index, ref[i].index);
    EXPECT_EQ(got[i].label, ref[i].label);
    EXPECT_EQ(got[i].status, 0u);
    ASSERT_EQ(got[i].render.size(), size_t{kRenderFloats});
    const std::string& name = names[got[i].index];
    if (got[i].render[0] == 1) {
      ++handed[name];
      EXPECT_EQ(got[i].jpeg, files_->at(name));  // As stored, byte for byte.
      EXPECT_EQ(got[i].render[15], name == "b/progressive.jpg" ? 1 : 0) << name;
      EXPECT_EQ(RenderOnCpu(got[i], 48), ref[i].image) << name;
    } else {
      ++decoded[name];
      EXPECT_EQ(got[i].image, ref[i].image) << name;
    }
  }
  for (const char* name : {"a/444.jpg", "a/422.jpg", "a/420.jpg", "a/gray.jpg",
                           "b/progressive.jpg"}) {
    EXPECT_EQ(handed[name], 3) << name;
  }
  for (const char* name : {"b/cmyk.jpg", "b/png.png", "b/big.jpg"}) {
    EXPECT_EQ(decoded[name], 3) << name;
    EXPECT_EQ(handed[name], 0) << name;
  }
  auto st = d.Connect()->GetStats();
  uint64_t client = 0;
  for (const auto& s : st->sessions()) client += s.samples_client_decoded();
  EXPECT_GE(client, 15u);  // 5 files x 3 epochs, plus what was prefetched.
}

TEST_F(ClientDecodeTest, AllOnTheCpuEqualsTheCpuPath) {
  TestDaemon d(false, 2);
  const std::vector<Delivered> ref = ReadSpec(d, Spec(), 4);
  const std::vector<Delivered> got = ReadSpec(d, ClientSpec(1), 4);
  ASSERT_EQ(got.size(), ref.size());
  EXPECT_EQ(CountWhere(got, 0), 16);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].index, ref[i].index);
    EXPECT_EQ(got[i].image, ref[i].image);
  }
}

TEST_F(ClientDecodeTest, TheSplitFollowsTheClientsShare) {
  TestDaemon d(false, 2);
  auto s = d.Connect()->OpenSession(ClientSpec(0.5, 1 << 20));
  ASSERT_TRUE(s.ok()) << s.status();
  // Half of each batch of 4 (every file fits 1 MiB; CMYK and PNG stay the
  // daemon's wherever they fall).
  const std::vector<Delivered> first = Read(**s, 4);
  const std::vector<std::string> names = Names(d);
  for (size_t i = 0; i < first.size(); ++i) {
    const std::string& name = names[first[i].index];
    const bool client_kind = name != "b/cmyk.jpg" && name != "b/png.png";
    EXPECT_EQ(first[i].render[0], (i % 4 >= 2 && client_kind) ? 1 : 0) << i << " " << name;
  }
  const Session::DaemonDecode mine = (*s)->daemon_decode();
  EXPECT_EQ(mine.share, 0.5);
  EXPECT_EQ(mine.threads, 2u);
  EXPECT_GE(mine.samples, 8u);
  EXPECT_GT(mine.nanos, 0u);
  // All on the CPU from the next batch the daemon starts: within the ring's
  // prefetch (4 slots) every batch is the daemon's.
  (*s)->SetCpuShare(1.0);
  const std::vector<Delivered> later = Read(**s, 8);
  for (size_t i = 5 * 4; i < later.size(); ++i) EXPECT_EQ(later[i].render[0], 0) << i;
  auto st = d.Connect()->GetStats();
  ASSERT_EQ(st->sessions_size(), 1);
  EXPECT_EQ(st->sessions(0).cpu_share(), 1.0);
}

// Sessions producing on one node share its decode threads: each counts on
// its fair part, which the client weighs the daemon's rate by.
TEST_F(ClientDecodeTest, EachSessionCountsOnItsPartOfThePool) {
  TestDaemon d(false, 2);
  auto c = d.Connect();
  auto one = c->OpenSession(ClientSpec(1.0, 1 << 20));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ((*one)->daemon_decode().threads, 2u);  // Alone on the pool.
  auto two = c->OpenSession(ClientSpec(1.0, 1 << 20));
  ASSERT_TRUE(two.ok()) << two.status();
  bool halved = false;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!halved && absl::Now() < deadline) {  // Both read: both produce.
    ASSERT_TRUE((*one)->Next(absl::Seconds(30)).ok());
    ASSERT_TRUE((*two)->Next(absl::Seconds(30)).ok());
    halved = (*one)->daemon_decode().threads == 1 && (*two)->daemon_decode().threads == 1;
  }
  EXPECT_TRUE(halved);
}

TEST_F(ClientDecodeTest, ValSamplesAreHandedOverToo) {
  TestDaemon d(false, 2);
  v1::SessionSpec spec = Spec(v1::TRANSFORM_VAL);
  const std::vector<Delivered> ref = ReadSpec(d, spec, 2);
  spec.mutable_client_decode()->set_max_bytes(1 << 20);
  const std::vector<Delivered> got = ReadSpec(d, spec, 2);
  ASSERT_EQ(got.size(), ref.size());
  EXPECT_EQ(CountWhere(got, 1), 6);  // All but CMYK and PNG.
  // The val box is fractional and the record holds it as float32: a value
  // on a rounding edge may land one step away.
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].render[0] != 1) continue;
    const std::vector<uint8_t> mine = RenderOnCpu(got[i], 48);
    ASSERT_EQ(mine.size(), ref[i].image.size());
    size_t off = 0;
    for (size_t k = 0; k < mine.size(); ++k) {
      EXPECT_LE(std::abs(int(mine[k]) - int(ref[i].image[k])), 1) << i << " " << k;
      off += mine[k] != ref[i].image[k];
    }
    EXPECT_LT(off, mine.size() / 100) << i;
  }
}

TEST_F(ClientDecodeTest, EncodedFieldsCarryFilesAsStored) {
  TestDaemon d(false, 2);
  v1::SessionSpec spec;
  spec.mutable_dataset()->mutable_folder()->set_path(*root_);
  spec.set_batch_size(8);
  spec.set_on_error(v1::ON_ERROR_ZEROS);
  v1::FieldSpec* raw = spec.add_fields();
  raw->set_name("raw");
  raw->set_kind(v1::FieldSpec::KIND_ENCODED);
  raw->add_shape(4 + (64 << 10));
  v1::FieldSpec* label = spec.add_fields();
  label->set_name("label");
  label->set_kind(v1::FieldSpec::KIND_LABEL);
  label->set_dtype(v1::DTYPE_INT32);
  auto s = d.Connect()->OpenSession(spec);
  ASSERT_TRUE(s.ok()) << s.status();
  auto batch = (*s)->Next(absl::Seconds(30));
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ(batch->samples(), 8u);
  const BatchField f = batch->field(0);
  const std::vector<std::string> names = Names(d);
  for (uint32_t i = 0; i < 8; ++i) {
    const std::string& name = names[batch->indices()[i]];
    const auto* p = static_cast<const uint8_t*>(f.data) + i * f.sample_bytes;
    uint32_t n;
    std::memcpy(&n, p, 4);
    if (name == "b/big.jpg") {  // Over 64 KiB: a decode error, zeros.
      EXPECT_EQ(batch->status()[i], 2u);
      EXPECT_EQ(n, 0u);
    } else {
      EXPECT_EQ(batch->status()[i], 0u) << name;
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(p + 4), n), files_->at(name));
    }
  }
}

TEST_F(ClientDecodeTest, BadSpecsAreNamed) {
  TestDaemon d(false, 1);
  auto c = d.Connect();
  auto refused = [&](const v1::SessionSpec& spec, const std::string& words) {
    auto s = c->OpenSession(spec);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(words), std::string::npos) << s.status();
  };
  refused(ClientSpec(1.5), "cpu_share 1.5 must be in 0..1");
  refused(ClientSpec(0, 100), "max_bytes 100 must be");
  v1::SessionSpec both = ClientSpec(0);
  both.mutable_pixel_cache()->set_max_side(128);
  refused(both, "client_decode and pixel_cache exclude each other");
  v1::SessionSpec masks;
  masks.mutable_dataset()->mutable_folder()->set_path(*root_);
  masks.set_batch_size(2);
  masks.mutable_client_decode();
  v1::FieldSpec* m = masks.add_fields();
  m->set_name("mask");
  m->set_kind(v1::FieldSpec::KIND_MASK);
  m->add_shape(32);
  m->add_shape(32);
  masks.add_pipeline()->mutable_resize()->set_mode(v1::ResizeOp::MODE_EXACT);
  masks.mutable_pipeline(0)->mutable_resize()->set_width(32);
  masks.mutable_pipeline(0)->mutable_resize()->set_height(32);
  refused(masks, "no image field of 1 or 3 channels");
  v1::FieldSpec* taken = masks.add_fields();
  *taken = *m;
  taken->set_name("mask_jpeg");
  m->set_kind(v1::FieldSpec::KIND_IMAGE);
  m->add_shape(3);
  m->set_name("mask");
  refused(masks, "field 'mask_jpeg' is taken");
}

}  // namespace
}  // namespace stoker
