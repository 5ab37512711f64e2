#include "server/sources/arrays/nifti.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/sources/arrays/nifti_file.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

namespace fs = std::filesystem;

template <typename T>
void Put(std::string* s, size_t at, T v) {
  std::memcpy(&(*s)[at], &v, sizeof(T));
}

// A NIfTI-1 file of int16-sized dims (tests/testdata.h), its voxel offset set.
std::string Nifti1(const std::vector<int64_t>& dims, int datatype, const std::string& voxels,
                   float slope = 0, float inter = 0, float vox_offset = 352) {
  std::string s = testdata::NiftiBytes(1, dims, datatype, voxels, slope, inter);
  Put<float>(&s, 108, vox_offset);
  return s;
}

using testdata::Gzip;

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// int16 voxels of a 5 x 6 x 7 volume with structure and noise, x fastest.
std::vector<int16_t> Voxels() {
  std::vector<int16_t> v(5 * 6 * 7);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<int16_t>(std::sin(i * 0.1) * 300 + (i * 2654435761u % 17));
  return v;
}

TEST(NiftiHeaderTest, RefusesWhatIsNotAPlainVolumeByName) {
  const std::string good = Nifti1({5, 6, 7}, 4, "");
  auto why = [](std::string bytes) {
    absl::StatusOr<nifti::Header> h =
        nifti::ParseHeader(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    EXPECT_FALSE(h.ok());
    return std::string(h.status().message());
  };
  std::string swapped = good;
  Put<int32_t>(&swapped, 0, __builtin_bswap32(348));
  EXPECT_NE(why(swapped).find("big-endian"), std::string::npos);
  std::string pair = good;
  std::memcpy(&pair[344], "ni1\0", 4);
  EXPECT_NE(why(pair).find("two-file pair"), std::string::npos);
  EXPECT_NE(why(Nifti1({5, 6, 7}, 128, "")).find("RGB"), std::string::npos);
  EXPECT_NE(why(Nifti1({5, 6, 7}, 32, "")).find("complex"), std::string::npos);
  EXPECT_NE(why(Nifti1({5, 0, 7}, 4, "")).find("dim[2] is 0"), std::string::npos);
  EXPECT_NE(why(Nifti1({5, 6, 7}, 4, "", 0, 0, 352.5f)).find("not a byte offset"),
            std::string::npos);
  EXPECT_NE(why(Nifti1({32767, 32767, 32767, 32767, 32767}, 64, "")).find("exceeds"),
            std::string::npos);
  EXPECT_NE(why(Nifti1({5, 6, 7}, 4, "", 2.0f, INFINITY)).find("scl_inter"), std::string::npos);
  std::string eight = good;
  Put<int16_t>(&eight, 40, 8);
  EXPECT_NE(why(eight).find("not 1..7"), std::string::npos);
  EXPECT_NE(why(good.substr(0, 200)).find("shorter than 348"), std::string::npos);
  EXPECT_NE(why("plain text, not a volume").find("not a NIfTI file"), std::string::npos);
  // A voxel offset of 0 means right after the header, as nibabel reads it.
  absl::StatusOr<nifti::Header> h = nifti::ParseHeader(
      reinterpret_cast<const uint8_t*>(Nifti1({5, 6, 7}, 4, "", 0, 0, 0).data()), 352);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->data_offset, 352u);
  EXPECT_EQ(h->shape, (std::vector<uint64_t>{5, 6, 7}));
  EXPECT_FALSE(h->scaled);  // A slope of 0: the raw values.
}

TEST(NiftiHeaderTest, AffineIsSformElseQformElseTheShapes) {
  std::string s = Nifti1({5, 6, 7}, 4, "");
  // No codes: nibabel's shape_zoom_affine (x flipped, origin at the centre).
  auto parse = [&] {
    return *nifti::ParseHeader(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  std::array<double, 12> base = {-1, 0, 0, 2, 0, 1, 0, -2.5, 0, 0, 1, -3};
  EXPECT_EQ(parse().affine, base);
  // A qform: a 180-degree turn about z (quatern_d = 1), qfac -1, offsets.
  Put<int16_t>(&s, 252, 1);
  Put<float>(&s, 76, -1.0f);
  Put<float>(&s, 80, 2.0f);
  Put<float>(&s, 264, 1.0f);
  Put<float>(&s, 268, 10.0f);
  Put<float>(&s, 272, 20.0f);
  Put<float>(&s, 276, 30.0f);
  std::array<double, 12> q = {-2, 0, 0, 10, 0, -1, 0, 20, 0, 0, -1, 30};
  EXPECT_EQ(parse().affine, q);
  // An sform wins.
  Put<int16_t>(&s, 254, 2);
  for (int k = 0; k < 12; ++k) Put<float>(&s, 280 + 4 * k, static_cast<float>(k + 1));
  std::array<double, 12> sform = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  EXPECT_EQ(parse().affine, sform);
}

// The scaled reference: voxel (x, y, z) in row-major (x slowest) order.
std::vector<float> Reference(const std::vector<int16_t>& raw, double slope, double inter) {
  std::vector<float> out(raw.size());
  for (int x = 0; x < 5; ++x)
    for (int y = 0; y < 6; ++y)
      for (int z = 0; z < 7; ++z)
        out[(x * 6 + y) * 7 + z] =
            static_cast<float>(static_cast<double>(raw[x + 5 * (y + 6 * z)]) * slope + inter);
  return out;
}

class NiftiSourceTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testdata::MakeTempDir("nifti"); }
  void TearDown() override { fs::remove_all(dir_); }

  absl::StatusOr<std::shared_ptr<const ArraySource>> Open(const std::string& path,
                                                          VolumeCache* cache) {
    SourceContext ctx;
    ctx.volumes = cache;
    return OpenNiftiSource(path, "", ctx);
  }
  std::vector<float> Whole(const ArraySource& a, size_t i, uint32_t file, absl::Status* s) {
    const std::vector<uint64_t> start = {0, 0, 0}, count = {5, 6, 7};
    std::vector<float> out(5 * 6 * 7);
    *s = a.ReadArray(i, file, start.data(), count.data(), ElemType::kFloat32,
                     reinterpret_cast<uint8_t*>(out.data()));
    return out;
  }
  std::string dir_;
};

TEST_F(NiftiSourceTest, ScaledCompressedAndPlainVolumesReadAsNibabelGivesThem) {
  const std::vector<int16_t> raw = Voxels();
  const std::string plain = Nifti1({5, 6, 7}, 4, Bytes(raw), 0.25f, -3.5f);
  // Two gzip members (as bgzip and pigz -i write), an upper-case name.
  ASSERT_TRUE(testdata::WriteFile(dir_ + "/a.NII.GZ",
                                  Gzip(plain.substr(0, 500)) + Gzip(plain.substr(500))).ok());
  ASSERT_TRUE(testdata::WriteFile(dir_ + "/b.nii", plain).ok());
  ASSERT_TRUE(testdata::WriteFile(dir_ + "/notes.txt", "not a volume").ok());
  VolumeCache cache(1 << 20);
  absl::StatusOr<std::shared_ptr<const ArraySource>> a = Open(dir_, &cache);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ((*a)->size(), 2u);
  EXPECT_EQ((*a)->type(), ElemType::kFloat32);
  EXPECT_EQ((*a)->shape(0), (std::vector<uint64_t>{5, 6, 7}));
  const std::vector<float> want = Reference(raw, 0.25, -3.5);
  absl::Status s;
  EXPECT_EQ(Whole(**a, 0, 0, &s), want);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(Whole(**a, 1, 0, &s), want);
  EXPECT_EQ(cache.decodes(), 2u);
  // A region: [1..3] x [2..5] x [4..6].
  const std::vector<uint64_t> start = {1, 2, 4}, count = {3, 4, 3};
  std::vector<float> region(3 * 4 * 3);
  ASSERT_TRUE((*a)->Read(0, start.data(), count.data(), ElemType::kFloat32,
                         reinterpret_cast<uint8_t*>(region.data())).ok());
  for (int x = 0; x < 3; ++x)
    for (int y = 0; y < 4; ++y)
      for (int z = 0; z < 3; ++z)
        ASSERT_EQ(region[(x * 4 + y) * 3 + z], want[((x + 1) * 6 + y + 2) * 7 + z + 4]);
  // Too large for the cache: the plain volume by region from its file, the
  // compressed one a per-sample error naming the flag.
  VolumeCache tiny(64);
  a = Open(dir_, &tiny);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Whole(**a, 1, 0, &s), want);
  EXPECT_TRUE(s.ok()) << s;
  std::fill(region.begin(), region.end(), 0.0f);
  ASSERT_TRUE((*a)->Read(1, start.data(), count.data(), ElemType::kFloat32,
                         reinterpret_cast<uint8_t*>(region.data())).ok());
  EXPECT_EQ(region[0], want[(1 * 6 + 2) * 7 + 4]);
  Whole(**a, 0, 0, &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("--volume-cache-bytes"), std::string::npos) << s;
  EXPECT_EQ(tiny.decodes(), 0u);
}

TEST_F(NiftiSourceTest, AManifestPairsImagesWithLabelVolumesAndClasses) {
  const std::vector<int16_t> raw = Voxels();
  std::vector<uint8_t> seg(raw.size());
  for (size_t i = 0; i < seg.size(); ++i) seg[i] = raw[i] > 100;
  ASSERT_TRUE(testdata::WriteFile(dir_ + "/i.nii.gz", Gzip(Nifti1({5, 6, 7}, 4, Bytes(raw)))).ok());
  ASSERT_TRUE(testdata::WriteFile(dir_ + "/s.nii.gz", Gzip(Nifti1({5, 6, 7}, 2, Bytes(seg)))).ok());
  ASSERT_TRUE(testdata::WriteFile(dir_ + "/small.nii",
                                  Nifti1({5, 6, 6}, 2, std::string(5 * 6 * 6, '\1'))).ok());
  ASSERT_TRUE(testdata::WriteFile(dir_ + "/m.tsv",
                                  "# image, labels, class\ni.nii.gz\ts.nii.gz\t3\n"
                                  "i.nii.gz\tsmall.nii\t1\n").ok());
  VolumeCache cache(1 << 20);
  absl::StatusOr<std::shared_ptr<const ArraySource>> a = Open(dir_ + "/m.tsv", &cache);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->files(), 2u);
  EXPECT_EQ((*a)->label(0), 3);
  absl::Status s;
  const std::vector<float> labels = Whole(**a, 0, 1, &s);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(labels, Reference(std::vector<int16_t>(seg.begin(), seg.end()), 1, 0));
  EXPECT_EQ(Whole(**a, 0, 0, &s), Reference(raw, 1, 0));
  // A label volume of another shape: that sample fails, naming both.
  EXPECT_EQ((*a)->Broken(1).code(), absl::StatusCode::kDataLoss);
  EXPECT_NE((*a)->Broken(1).message().find("small.nii: shape [5, 6, 6] is not its image's "
                                           "[5, 6, 7]"),
            std::string::npos)
      << (*a)->Broken(1);
  // Lines of different column counts are refused by line number.
  ASSERT_TRUE(testdata::WriteFile(dir_ + "/bad.tsv", "i.nii.gz\ts.nii.gz\ni.nii.gz\n").ok());
  a = Open(dir_ + "/bad.tsv", &cache);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(a.status().message().find("line 2"), std::string::npos) << a.status();
}

// A label volume's foreground (for label-biased patches) is its voxels
// != 0 in nibabel's order, built from the kept volume once and kept beside
// it; without a cache, or for a volume too large for it, read by region.
TEST_F(NiftiSourceTest, ALabelVolumesForegroundIsBuiltOnceAndKept) {
  const std::vector<int16_t> raw = Voxels();
  std::vector<uint8_t> seg(raw.size());  // x fastest, as stored.
  for (size_t i = 0; i < seg.size(); ++i) seg[i] = raw[i] > 100 ? 2 : 0;
  std::vector<uint64_t> want;  // Row-major offsets, x slowest.
  for (uint64_t x = 0; x < 5; ++x)
    for (uint64_t y = 0; y < 6; ++y)
      for (uint64_t z = 0; z < 7; ++z)
        if (seg[x + 5 * (y + 6 * z)] != 0) want.push_back((x * 6 + y) * 7 + z);
  ASSERT_FALSE(want.empty());
  ASSERT_TRUE(testdata::WriteFile(dir_ + "/i.nii.gz", Gzip(Nifti1({5, 6, 7}, 4, Bytes(raw)))).ok());
  ASSERT_TRUE(testdata::WriteFile(dir_ + "/s.nii", Nifti1({5, 6, 7}, 2, Bytes(seg))).ok());
  ASSERT_TRUE(testdata::WriteFile(dir_ + "/m.tsv", "i.nii.gz\ts.nii\n").ok());
  auto check = [&](const absl::StatusOr<Foreground>& fg) {
    ASSERT_TRUE(fg.ok()) << fg.status();
    EXPECT_EQ(fg->elements(), 5u * 6 * 7);
    ASSERT_EQ(fg->count(), want.size());
    for (size_t j = 0; j < want.size(); ++j) EXPECT_EQ(fg->Positive(j), want[j]);
  };
  VolumeCache cache(1 << 20);
  absl::StatusOr<std::shared_ptr<const ArraySource>> a = Open(dir_ + "/m.tsv", &cache);
  ASSERT_TRUE(a.ok()) << a.status();
  const absl::StatusOr<Foreground> first = (*a)->ForegroundOf(0, 1);
  check(first);
  EXPECT_EQ(cache.decodes(), 1u);            // The label volume, not the image.
  EXPECT_EQ(cache.Stats().entries(), 2u);    // It and its foreground.
  const absl::StatusOr<Foreground> again = (*a)->ForegroundOf(0, 1);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->bytes().get(), first->bytes().get());  // Kept, not built again.
  for (VolumeCache* c : {static_cast<VolumeCache*>(nullptr), new VolumeCache(64)}) {
    a = Open(dir_ + "/m.tsv", c);
    ASSERT_TRUE(a.ok()) << a.status();
    check((*a)->ForegroundOf(0, 1));
    delete c;
  }
}

TEST_F(NiftiSourceTest, HostileFilesAreRefusedByName) {
  const std::vector<int16_t> raw = Voxels();
  const std::string plain = Nifti1({5, 6, 7}, 4, Bytes(raw));
  // A FIFO named as a volume never blocks the daemon.
  ASSERT_EQ(mkfifo((dir_ + "/fifo.nii").c_str(), 0644), 0);
  EXPECT_EQ(Open(dir_ + "/fifo.nii", nullptr).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A 1 TB sparse .nii.gz is never read: no gzip of its volume is that big.
  ASSERT_TRUE(testdata::WriteFile(dir_ + "/sparse.nii.gz", Gzip(plain)).ok());
  ASSERT_EQ(truncate((dir_ + "/sparse.nii.gz").c_str(), off_t{1} << 40), 0);
  absl::StatusOr<std::shared_ptr<const ArraySource>> a = Open(dir_ + "/sparse.nii.gz", nullptr);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(a.status().message().find("more than a gzip"), std::string::npos) << a.status();
  // A vox_offset of 1.2e11 in a sparse 100 GB file whose gzip-ratio check
  // it would pass: refused by the header, before any buffer is sized.
  const std::string far = Nifti1({5, 6, 7}, 4, Bytes(raw), 0, 0, 1.2e11f);
  ASSERT_TRUE(testdata::WriteFile(dir_ + "/far.nii.gz", Gzip(far)).ok());
  ASSERT_EQ(truncate((dir_ + "/far.nii.gz").c_str(), off_t{100} << 30), 0);
  for (const char* name : {"/far.nii.gz", "/far.nii"}) {
    if (std::string(name) == "/far.nii") {
      ASSERT_TRUE(testdata::WriteFile(dir_ + name, far).ok());
    }
    a = Open(dir_ + name, nullptr);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition) << name;
    EXPECT_NE(a.status().message().find("bytes of extensions"), std::string::npos) << a.status();
  }
  // A plain file shorter than its header's volume.
  ASSERT_TRUE(testdata::WriteFile(dir_ + "/short.nii", plain.substr(0, plain.size() - 2)).ok());
  a = Open(dir_ + "/short.nii", nullptr);
  EXPECT_NE(a.status().message().find("declares voxels up to byte 772"), std::string::npos)
      << a.status();
  // A stream that inflates past its header's volume, and one that stops short.
  VolumeCache cache(1 << 20);
  absl::Status s;
  for (const std::string& bytes : {Gzip(plain + "trailing"), Gzip(plain.substr(0, 700))}) {
    ASSERT_TRUE(testdata::WriteFile(dir_ + "/odd.nii.gz", bytes).ok());
    a = Open(dir_ + "/odd.nii.gz", &cache);
    ASSERT_TRUE(a.ok()) << a.status();
    Whole(**a, 0, 0, &s);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_NE(s.message().find("odd.nii.gz: inflates to"), std::string::npos) << s;
  }
  // Rewritten after the dataset opened: DATA_LOSS, never the new bytes.
  ASSERT_TRUE(testdata::WriteFile(dir_ + "/v.nii.gz", Gzip(plain)).ok());
  a = Open(dir_ + "/v.nii.gz", &cache);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(testdata::WriteFile(dir_ + "/v.nii.gz", Gzip(plain + "x")).ok());
  Whole(**a, 0, 0, &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("changed since"), std::string::npos) << s;
  // Confined to a folder: a symlink out of it is followed, as the caller's
  // own open follows it, when listed and when named; ".." is refused.
  fs::create_directories(dir_ + "/in");
  fs::create_symlink(dir_ + "/v.nii.gz", dir_ + "/in/escape.nii.gz");
  auto in = std::make_shared<Beneath>();
  in->dir_fd = open((dir_ + "/in").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  in->prefix = dir_ + "/in";
  SourceContext ctx;
  ctx.beneath = in;
  EXPECT_TRUE(OpenNiftiSource(dir_ + "/in/escape.nii.gz", "", ctx).ok());
  EXPECT_EQ(OpenNiftiSource(dir_ + "/v.nii.gz", "", ctx).status().code(),
            absl::StatusCode::kPermissionDenied);
  a = OpenNiftiSource(dir_ + "/in/../v.nii.gz", "", ctx);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(a.status().message().find("leads outside"), std::string::npos) << a.status();
  EXPECT_TRUE(OpenNiftiSource(dir_ + "/in", "", ctx).ok());
}

}  // namespace
}  // namespace stoker

namespace stoker {
namespace {

// Volumes larger than a slab decode as a whole reorder would: across
// slabs of several rows, of one row, and of part of a row (a strided
// copy), plain and compressed (two members split mid-slab), scaled or not.
TEST(NiftiDecodeTest, VolumesLargerThanASlabDecodeSlabBySlab) {
  const std::string dir = testdata::MakeTempDir("nslab");
  struct Case {
    int version;
    std::vector<int64_t> dims;
    int datatype;  // 2 uint8, 4 int16.
    float slope, inter;
  } cases[] = {
      {1, {300, 200, 40}, 4, 0, 0},          // Slabs of 34 rows of z.
      {1, {1100, 1000, 3, 2}, 4, 0.5f, 7},   // A row of z per slab, scaled.
      {2, {4500000, 1, 2}, 2, 0, 0},         // Part of a row of x per slab.
  };
  for (const Case& c : cases) {
    std::vector<uint64_t> shape(c.dims.begin(), c.dims.end());
    uint64_t total = 1;
    for (uint64_t d : shape) total *= d;
    const size_t elem = c.datatype == 4 ? 2 : 1;
    std::string raw(total * elem, '\0');
    for (uint64_t i = 0; i < total; ++i) {
      const int v = static_cast<int>(std::sin(i * 0.001) * 100 + (i * 2654435761u % 13));
      if (elem == 2) {
        Put<int16_t>(&raw, i * 2, static_cast<int16_t>(v));
      } else {
        raw[i] = static_cast<char>(v);
      }
    }
    // The reference: file element i (x fastest) at its C-order place.
    const bool scaled = c.slope != 0;
    const size_t out_elem = scaled ? 4 : elem;
    std::string want(total * out_elem, '\0');
    const size_t n = shape.size();
    for (uint64_t i = 0; i < total; ++i) {
      uint64_t rest = i, at = 0;
      std::vector<uint64_t> idx(n);
      for (size_t k = 0; k < n; ++k) {
        idx[k] = rest % shape[k];
        rest /= shape[k];
      }
      for (size_t k = 0; k < n; ++k) at = at * shape[k] + idx[k];
      if (scaled) {
        int16_t s;
        std::memcpy(&s, &raw[i * 2], 2);
        Put<float>(&want, at * 4, static_cast<float>(s * 0.5 + 7));
      } else {
        std::memcpy(&want[at * elem], &raw[i * elem], elem);
      }
    }
    std::string file = testdata::NiftiBytes(c.version, c.dims, c.datatype, raw, c.slope, c.inter);
    const std::string cut = file.substr(0, 5 << 20);
    const std::string rest = file.size() > cut.size() ? file.substr(cut.size()) : "";
    ASSERT_TRUE(testdata::WriteFile(dir + "/v.nii", file).ok());
    ASSERT_TRUE(testdata::WriteFile(dir + "/v.nii.gz", Gzip(cut) + Gzip(rest)).ok());
    for (const char* name : {"/v.nii", "/v.nii.gz"}) {
      FileVersion version;
      absl::StatusOr<nifti::Header> h = nifti::ReadHeader(dir + name, nullptr, &version);
      ASSERT_TRUE(h.ok()) << h.status();
      ASSERT_EQ(h->volume_bytes, want.size());
      std::string out(want.size(), '\x55');
      absl::Status s = nifti::Decode(dir + name, nullptr, *h, version, &VolumeCache::Serial,
                                     reinterpret_cast<uint8_t*>(out.data()));
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_TRUE(out == want) << name << " " << c.dims[0];
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stoker
