#include "server/sources/arrays/hdf5_file.h"

#include <hdf5/serial/hdf5.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace stoker {
namespace h5 {
namespace {

// A file of 4 KiB as the daemon opened it (no descriptor needed to check).
File SmallFile() {
  File f;
  f.path = "f.h5";
  f.size = 4096;
  return f;
}

h5probe::Dataset Uint8Chunked(std::vector<uint64_t> dims, std::vector<uint64_t> chunk) {
  h5probe::Dataset d;
  d.plain = true;
  d.size = 1;
  d.layout = h5probe::Layout::kChunked;
  d.dims = std::move(dims);
  d.chunk = std::move(chunk);
  return d;
}

// Whatever the reader claims, the daemon checks it against the file and
// the geometry before reading: each lie is DATA_LOSS (or refused), never a
// division by zero, a huge buffer or a read outside the file.
TEST(CheckSetTest, LiesOfTheReaderAreRefused) {
  const File f = SmallFile();
  // A dimension near 2^64 whose grid would wrap to 0 chunks.
  h5probe::Dataset wrap = Uint8Chunked({1, UINT64_MAX}, {1, 2});
  EXPECT_FALSE(CheckSet(f, "x", wrap).ok());
  wrap.chunks.resize(uint64_t{1} << 20);  // However many chunks it lists.
  EXPECT_FALSE(CheckSet(f, "x", wrap).ok());
  // 4 GiB chunks (never written, so nothing in the file to check).
  h5probe::Dataset huge = Uint8Chunked({65536, 65536}, {65536, 65536});
  huge.chunks.resize(1);
  absl::Status s = CheckSet(f, "x", huge).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("67108864 at most"), std::string::npos) << s;
  // A chunk past the file's end, or with an offset that wraps.
  h5probe::Dataset outside = Uint8Chunked({4, 4}, {2, 4});
  outside.chunks = {{4000, 200, 0}, {0, 0, 0}};
  EXPECT_EQ(CheckSet(f, "x", outside).status().code(), absl::StatusCode::kDataLoss);
  outside.chunks = {{UINT64_MAX - 4, 8, 0}, {0, 0, 0}};
  EXPECT_EQ(CheckSet(f, "x", outside).status().code(), absl::StatusCode::kDataLoss);
  // An index of another length than the grid.
  outside.chunks = {{0, 8, 0}};
  EXPECT_EQ(CheckSet(f, "x", outside).status().code(), absl::StatusCode::kDataLoss);
  // Compact bytes of another size, or past HDF5's 64 KiB.
  h5probe::Dataset compact;
  compact.plain = true;
  compact.size = 1;
  compact.layout = h5probe::Layout::kCompact;
  compact.dims = {5};
  compact.compact = "1234";
  EXPECT_EQ(CheckSet(f, "x", compact).status().code(), absl::StatusCode::kDataLoss);
  compact.dims = {70000};
  compact.compact.assign(70000, 'c');
  EXPECT_EQ(CheckSet(f, "x", compact).status().code(), absl::StatusCode::kDataLoss);
  // Contiguous bytes past the file's end.
  h5probe::Dataset contiguous;
  contiguous.plain = true;
  contiguous.size = 4;
  contiguous.dims = {2000};
  contiguous.allocated = true;
  contiguous.offset = 100;
  EXPECT_EQ(CheckSet(f, "x", contiguous).status().code(), absl::StatusCode::kDataLoss);
  contiguous.dims = {999};
  EXPECT_TRUE(CheckSet(f, "x", contiguous).ok());
  // Filters it does not undo, and elements that are not plain numbers.
  h5probe::Dataset szip = Uint8Chunked({4, 4}, {4, 4});
  szip.chunks.resize(1);
  szip.filters = {{4, 0}};
  s = CheckSet(f, "x", szip).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("filter 4 (szip)"), std::string::npos) << s;
  h5probe::Dataset odd = Uint8Chunked({4}, {4});
  odd.plain = false;
  EXPECT_EQ(CheckSet(f, "x", odd).status().code(), absl::StatusCode::kFailedPrecondition);
}

// Two descriptions of the same file that differ in anything read (the
// chunk index, the fill value, the byte order) key different decodes.
TEST(CheckSetTest, TheDescriptionIsPartOfWhatIsKept) {
  const File f = SmallFile();
  h5probe::Dataset a = Uint8Chunked({4, 4}, {2, 4});
  a.chunks = {{100, 8, 0}, {200, 8, 0}};
  h5probe::Dataset b = a;
  b.chunks[1].offset = 300;
  h5probe::Dataset c = a;
  c.fill = "\x07";
  auto sa = CheckSet(f, "x", a), sb = CheckSet(f, "x", b), sc = CheckSet(f, "x", c);
  ASSERT_TRUE(sa.ok() && sb.ok() && sc.ok());
  EXPECT_NE(sa->described, sb->described);
  EXPECT_NE(sa->described, sc->described);
  EXPECT_EQ(sa->described, CheckSet(f, "x", a)->described);
}

// HDF5's fletcher32: the checksum libhdf5 itself appended to a chunk (odd
// lengths included) is the one computed here.
TEST(Fletcher32Test, MatchesWhatTheLibraryStores) {
  const std::string path = ::testing::TempDir() + "/fletcher.h5";
  for (hsize_t n : {5, 64, 1001}) {
    const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t space = H5Screate_simple(1, &n, nullptr);
    const hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(plist, 1, &n);
    H5Pset_fletcher32(plist);
    const hid_t set = H5Dcreate2(f, "x", H5T_STD_U8LE, space, H5P_DEFAULT, plist, H5P_DEFAULT);
    std::vector<uint8_t> data(n);
    for (hsize_t i = 0; i < n; ++i) data[i] = static_cast<uint8_t>(i * 37 + 11);
    ASSERT_GE(H5Dwrite(set, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()), 0);
    H5Dflush(set);
    const hsize_t at = 0;
    uint32_t mask = 0;
    std::vector<uint8_t> raw(n + 4);
    ASSERT_GE(H5Dread_chunk(set, H5P_DEFAULT, &at, &mask, raw.data()), 0);
    uint32_t stored;
    std::memcpy(&stored, raw.data() + n, 4);
    EXPECT_EQ(Fletcher32(raw.data(), n), stored) << n << " bytes";
    H5Dclose(set);
    H5Pclose(plist);
    H5Sclose(space);
    H5Fclose(f);
  }
}

}  // namespace
}  // namespace h5
}  // namespace stoker
