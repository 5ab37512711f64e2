#include "server/sources/arrays/hdf5.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5/serial/hdf5.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/sources/source.h"
#include "tests/testdata.h"

namespace stoker {
namespace {
namespace fs = std::filesystem;

// Rows of smooth structure plus noise, as features and volumes look.
std::vector<float> Rows(size_t rows, size_t cols) {
  std::vector<float> v(rows * cols);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = std::sin(0.05f * static_cast<float>(i)) * 10.0f +
           static_cast<float>((i * 2654435761u) % 97) / 97.0f;
  }
  return v;
}

// Writes `data` [rows, cols] float32 as dataset `name`, gzip-chunked as
// h5py's compression="gzip" writes it (or contiguous), with `labels`.
void WriteH5(const std::string& path, const std::string& name, const std::vector<float>& data,
             hsize_t rows, hsize_t cols, bool gzip, const std::vector<int64_t>& labels = {}) {
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  const hsize_t dims[2] = {rows, cols};
  const hid_t space = H5Screate_simple(2, dims, nullptr);
  const hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
  if (gzip) {
    const hsize_t chunk[2] = {2, cols};
    H5Pset_chunk(plist, 2, chunk);
    H5Pset_shuffle(plist);
    H5Pset_deflate(plist, 4);
  }
  const hid_t set = H5Dcreate2(f, name.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, plist,
                               H5P_DEFAULT);
  ASSERT_GE(set, 0);
  ASSERT_GE(H5Dwrite(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()), 0);
  H5Dclose(set);
  if (!labels.empty()) {
    const hsize_t n = labels.size();
    const hid_t ls = H5Screate_simple(1, &n, nullptr);
    const hid_t l = H5Dcreate2(f, "labels", H5T_STD_I64LE, ls, H5P_DEFAULT, H5P_DEFAULT,
                               H5P_DEFAULT);
    H5Dwrite(l, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels.data());
    H5Dclose(l);
    H5Sclose(ls);
  }
  H5Pclose(plist);
  H5Sclose(space);
  H5Fclose(f);
}

// Row `i`, columns [from, from + n), as the source reads it.
std::vector<float> ReadRow(const ArraySource& a, size_t i, uint64_t from, uint64_t n) {
  std::vector<float> out(n);
  const absl::Status s =
      a.Read(i, &from, &n, ElemType::kFloat32, reinterpret_cast<uint8_t*>(out.data()));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// A gzip-chunked file is read the same per sample and held whole in RAM,
// bit-exact against what was written, with its labels.
TEST(Hdf5SourceTest, CompressedRowsAreExactHeldOrNot) {
  const std::string dir = testdata::MakeTempDir("h5-rows");
  const std::vector<float> data = Rows(6, 40);
  WriteH5(dir + "/feats.H5", "x", data, 6, 40, /*gzip=*/true, {0, 1, 2, 0, 1, 2});
  int charged = 0;
  const ChargeRam charge = [&](uint64_t bytes) {
    EXPECT_EQ(bytes, 6u * 40 * 4);
    ++charged;
    return std::make_shared<int>(0);
  };
  for (bool held : {false, true}) {
    auto src = OpenHdf5Source(dir + "/feats.H5", "x", "labels", held ? charge : nullptr, nullptr);
    ASSERT_TRUE(src.ok()) << src.status();
    ASSERT_EQ((*src)->size(), 6u);
    EXPECT_EQ((*src)->shape(3), std::vector<uint64_t>{40});
    EXPECT_EQ((*src)->label(4), 1);
    EXPECT_EQ((*src)->Name(5), dir + "/feats.H5:x[5]");
    EXPECT_EQ(ReadRow(**src, 3, 5, 30),
              std::vector<float>(data.begin() + 3 * 40 + 5, data.begin() + 3 * 40 + 35));
  }
  EXPECT_EQ(charged, 1);
  // Through the registry: a Dataset whose source is the arrays.
  v1::DatasetSpec spec;
  spec.mutable_hdf5()->set_path(dir + "/feats.H5");
  spec.mutable_hdf5()->set_dataset("x");
  spec.mutable_hdf5()->set_labels("labels");
  auto ds = OpenDataset(spec, SourceContext());
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_NE(ds->source->arrays(), nullptr);
  EXPECT_EQ(ds->samples.size(), 6u);
  EXPECT_EQ(ds->num_classes, 3u);
  EXPECT_EQ(ds->description, "hdf5:" + dir + "/feats.H5:x");
  std::string bytes;
  EXPECT_EQ(ds->source->Read(ds->samples[0].path, &bytes, nullptr).code(),
            absl::StatusCode::kFailedPrecondition);
  fs::remove_all(dir);
}

// Writes `name` [4, 3] of file type `ftype` from `values` in memory type
// `mtype`, laid out by `plist` (H5P_DEFAULT: contiguous).
void WriteSet(hid_t f, const char* name, hid_t ftype, hid_t mtype, const void* values,
              hid_t plist) {
  const hsize_t dims[2] = {4, 3};
  const hid_t space = H5Screate_simple(2, dims, nullptr);
  const hid_t set = H5Dcreate2(f, name, ftype, space, H5P_DEFAULT, plist, H5P_DEFAULT);
  ASSERT_GE(set, 0) << name;
  ASSERT_GE(H5Dwrite(set, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, values), 0) << name;
  H5Dclose(set);
  H5Sclose(space);
}

// Every way a dataset's bytes may lie that the daemon reads itself:
// big-endian (contiguous and chunked), IEEE half as h5py writes float16,
// compact, fletcher32 alone; each exact per sample and held whole. A filter
// it does not read is refused by name.
TEST(Hdf5SourceTest, EveryStoredFormIsReadExactly) {
  const std::string dir = testdata::MakeTempDir("h5-forms");
  const std::string path = dir + "/forms.h5";
  std::vector<float> want(12);
  int16_t i16[12];
  double f64[12];
  int32_t i32[12];
  uint16_t half[12];
  const uint16_t half_bits[4] = {0x3C00, 0xC100, 0x3800, 0x7BFF};  // 1, -2.5, 0.5, 65504
  const float half_values[4] = {1.0f, -2.5f, 0.5f, 65504.0f};
  for (int i = 0; i < 12; ++i) {
    i16[i] = static_cast<int16_t>(i * 100 - 500);
    f64[i] = i16[i];
    i32[i] = i16[i];
    half[i] = half_bits[i % 4];
    want[i] = static_cast<float>(i16[i]);
  }
  {
    const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t chunk[2] = {2, 3};
    const hid_t gzip = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(gzip, 2, chunk);
    H5Pset_shuffle(gzip);
    H5Pset_deflate(gzip, 4);
    const hid_t sum = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(sum, 2, chunk);
    H5Pset_fletcher32(sum);
    const hid_t compact = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_layout(compact, H5D_COMPACT);
    const hid_t nbit = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(nbit, 2, chunk);
    H5Pset_nbit(nbit);
    const hid_t h = H5Tcopy(H5T_IEEE_F32LE);  // As h5py makes float16.
    H5Tset_fields(h, 15, 10, 5, 0, 10);
    H5Tset_size(h, 2);
    H5Tset_ebias(h, 15);
    WriteSet(f, "be16", H5T_STD_I16BE, H5T_NATIVE_INT16, i16, H5P_DEFAULT);
    WriteSet(f, "be64", H5T_IEEE_F64BE, H5T_NATIVE_DOUBLE, f64, gzip);
    WriteSet(f, "half", h, h, half, gzip);
    WriteSet(f, "compact", H5T_STD_I32LE, H5T_NATIVE_INT32, i32, compact);
    WriteSet(f, "sum", H5T_STD_I32LE, H5T_NATIVE_INT32, i32, sum);
    WriteSet(f, "nbit", H5T_STD_I32LE, H5T_NATIVE_INT32, i32, nbit);
    H5Tclose(h);
    for (hid_t p : {gzip, sum, compact, nbit}) H5Pclose(p);
    H5Fclose(f);
  }
  const ChargeRam charge = [](uint64_t) { return std::make_shared<int>(0); };
  for (const char* name : {"be16", "be64", "half", "compact", "sum"}) {
    for (bool held : {false, true}) {
      auto src = OpenHdf5Source(path, name, "", held ? charge : nullptr, nullptr);
      ASSERT_TRUE(src.ok()) << name << ": " << src.status();
      ASSERT_EQ((*src)->size(), 4u) << name;
      for (size_t r = 0; r < 4; ++r) {
        std::vector<float> expect(want.begin() + r * 3, want.begin() + r * 3 + 3);
        if (std::string(name) == "half") {
          for (int c = 0; c < 3; ++c) expect[c] = half_values[(r * 3 + c) % 4];
        }
        EXPECT_EQ(ReadRow(**src, r, 0, 3), expect) << name << " row " << r << " held " << held;
      }
    }
  }
  absl::Status refused = OpenHdf5Source(path, "nbit", "", nullptr, nullptr).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("filter 5 (n-bit), which is not read"), std::string::npos)
      << refused;
  fs::remove_all(dir);
}

// What a hostile file or spec gets: a named error, never a hang or a read
// outside the file.
TEST(Hdf5SourceTest, RefusesWhatItMustNotRead) {
  const std::string dir = testdata::MakeTempDir("h5-hostile");
  const std::vector<float> data = Rows(4, 8);
  WriteH5(dir + "/a.h5", "x", data, 4, 8, /*gzip=*/false);
  // An external link to a file elsewhere is never followed.
  WriteH5(dir + "/other.h5", "x", data, 4, 8, /*gzip=*/false);
  {
    const hid_t f = H5Fopen((dir + "/a.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    ASSERT_GE(H5Lcreate_external((dir + "/other.h5").c_str(), "x", f, "ext", H5P_DEFAULT,
                                 H5P_DEFAULT),
              0);
    H5Fclose(f);
  }
  EXPECT_TRUE(OpenHdf5Source(dir + "/a.h5", "x", "", nullptr, nullptr).ok());
  EXPECT_EQ(OpenHdf5Source(dir + "/a.h5", "ext", "", nullptr, nullptr).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(OpenHdf5Source(dir + "/a.h5", "", "", nullptr, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenHdf5Source(dir + "/a.h5", "nope", "", nullptr, nullptr).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A FIFO is refused at open, not waited on.
  ASSERT_EQ(mkfifo((dir + "/fifo.h5").c_str(), 0644), 0);
  EXPECT_EQ(OpenHdf5Source(dir + "/fifo.h5", "x", "", nullptr, nullptr).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Confined beneath a sub-folder: a file outside it is refused.
  fs::create_directories(dir + "/in");
  auto in = std::make_shared<Beneath>();
  in->dir_fd = open((dir + "/in").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  in->prefix = dir + "/in";
  EXPECT_EQ(OpenHdf5Source(dir + "/a.h5", "x", "", nullptr, in).status().code(),
            absl::StatusCode::kPermissionDenied);
  fs::remove_all(dir);
}

// A feature store: a folder of gzip-chunked files named in any case (or
// not named so, found by content), each with its rows and labels; rows are
// addressed across files in name order.
TEST(Hdf5SourceTest, AFolderOfFeatureFilesIsRowsAcrossFiles) {
  const std::string dir = testdata::MakeTempDir("h5-store");
  const size_t rows[] = {5, 3, 4, 2};
  const char* names[] = {"/a.H5", "/b.h5", "/c.HDF5", "/d.features"};
  std::vector<std::vector<float>> data;
  for (int k = 0; k < 4; ++k) {
    data.push_back(Rows(rows[k], 16));
    for (float& v : data[k]) v += 100.0f * k;  // Each file's rows differ.
    std::vector<int64_t> labels(rows[k]);
    for (size_t i = 0; i < rows[k]; ++i) labels[i] = k * 10 + static_cast<int64_t>(i);
    WriteH5(dir + names[k], "x", data[k], rows[k], 16, /*gzip=*/true, labels);
  }
  ASSERT_TRUE(testdata::WriteFile(dir + "/notes.txt", "not HDF5").ok());  // Not listed.
  ASSERT_EQ(mkfifo((dir + "/pipe").c_str(), 0600), 0);  // Never opened to look.
  int charged = 0;
  const ChargeRam charge = [&](uint64_t) {
    ++charged;
    return std::make_shared<int>(0);
  };
  auto src = OpenHdf5Source(dir, "x", "labels", charge, nullptr);
  ASSERT_TRUE(src.ok()) << src.status();
  ASSERT_EQ((*src)->size(), 14u);
  EXPECT_EQ(charged, 4);  // Each compressed file held whole.
  size_t i = 0;
  for (int k = 0; k < 4; ++k) {
    for (size_t r = 0; r < rows[k]; ++r, ++i) {
      EXPECT_EQ(ReadRow(**src, i, 0, 16),
                std::vector<float>(data[k].begin() + r * 16, data[k].begin() + (r + 1) * 16))
          << i;
      EXPECT_EQ((*src)->label(i), k * 10 + static_cast<int64_t>(r));
      EXPECT_EQ((*src)->shape(i), std::vector<uint64_t>{16});
    }
  }
  EXPECT_EQ((*src)->Name(5), dir + "/b.h5:x[0]");
  // Without labels, `rows` says the same; without either, each file is one
  // sample (a volume), found in any case too.
  auto unlabelled = OpenHdf5Source(dir, "x", "", nullptr, nullptr, kDefaultMaxArraySamples, true);
  ASSERT_TRUE(unlabelled.ok()) << unlabelled.status();
  EXPECT_EQ((*unlabelled)->size(), 14u);
  EXPECT_EQ((*unlabelled)->label(7), 0);
  auto volumes = OpenHdf5Source(dir, "x", "", nullptr, nullptr);
  ASSERT_TRUE(volumes.ok());
  EXPECT_EQ((*volumes)->size(), 4u);
  EXPECT_EQ((*volumes)->shape(2), (std::vector<uint64_t>{4, 16}));
  // The total is capped, and a file without its labels is named.
  EXPECT_EQ(OpenHdf5Source(dir, "x", "labels", nullptr, nullptr, 13).status().code(),
            absl::StatusCode::kResourceExhausted);
  WriteH5(dir + "/d.h5", "x", data[0], rows[0], 16, true);
  absl::Status missing = OpenHdf5Source(dir, "x", "labels", nullptr, nullptr).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition);
  // The message names what the file holds.
  EXPECT_EQ(missing.message(), dir + "/d.h5: has no dataset 'labels' (its datasets: 'x')");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stoker
