// Chunked and compressed HDF5 volumes read through the decoded-volume
// cache: bit-exact against what was written, whatever the filters, edge
// chunks, unwritten chunks or cache size; hostile chunks are errors.
#include <hdf5/serial/hdf5.h>
#include <libdeflate.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/sources/hdf5.h"
#include "server/thread_pool.h"
#include "server/volume_cache.h"
#include "tests/testdata.h"

namespace stoker {
namespace {
namespace fs = std::filesystem;

constexpr hsize_t kDims[3] = {13, 17, 19};  // No dimension a multiple of a chunk's.
constexpr hsize_t kChunk[3] = {4, 5, 6};
constexpr size_t kVoxels = 13 * 17 * 19;

// Smooth structure plus noise, as scans look; `seed` shifts it per file.
std::vector<float> Volume(int seed) {
  std::vector<float> v(kVoxels);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = std::sin(0.01f * static_cast<float>(i + seed * 977)) * 100.0f +
           static_cast<float>(((i + seed) * 2654435761u) % 101) / 101.0f;
  }
  return v;
}

enum Filters { kNone = 0, kShuffle = 1, kDeflate = 2, kFletcher = 4 };

// Writes a [13, 17, 19] float32 volume `x`, chunked [4, 5, 6] with
// `filters` (in h5py's order: shuffle, then deflate, then fletcher32).
// With `fill`, only the first 8 planes are written and the rest keep the
// fill value 7.5 (chunks never written).
void WriteVolume(const std::string& path, const std::vector<float>& v, int filters,
                 bool fill = false) {
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  const hid_t space = H5Screate_simple(3, kDims, nullptr);
  const hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(plist, 3, kChunk);
  if (filters & kShuffle) H5Pset_shuffle(plist);
  if (filters & kDeflate) H5Pset_deflate(plist, 4);
  if (filters & kFletcher) H5Pset_fletcher32(plist);
  const float fill_value = 7.5f;
  if (fill) H5Pset_fill_value(plist, H5T_NATIVE_FLOAT, &fill_value);
  const hid_t set =
      H5Dcreate2(f, "x", H5T_IEEE_F32LE, space, H5P_DEFAULT, plist, H5P_DEFAULT);
  ASSERT_GE(set, 0);
  if (fill) {
    const hsize_t start[3] = {0, 0, 0}, count[3] = {8, 17, 19};
    const hid_t mem = H5Screate_simple(3, count, nullptr);
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
    ASSERT_GE(H5Dwrite(set, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, v.data()), 0);
    H5Sclose(mem);
  } else {
    ASSERT_GE(H5Dwrite(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
  }
  H5Dclose(set);
  H5Pclose(plist);
  H5Sclose(space);
  H5Fclose(f);
}

// The region [start, start + count) of a [13, 17, 19] volume.
std::vector<float> Region(const std::vector<float>& v, const uint64_t* start,
                          const uint64_t* count) {
  std::vector<float> out;
  for (uint64_t z = start[0]; z < start[0] + count[0]; ++z)
    for (uint64_t y = start[1]; y < start[1] + count[1]; ++y)
      for (uint64_t x = start[2]; x < start[2] + count[2]; ++x)
        out.push_back(v[(z * 17 + y) * 19 + x]);
  return out;
}

std::vector<float> Read(const ArraySource& a, size_t i, const uint64_t* start,
                        const uint64_t* count) {
  std::vector<float> out(count[0] * count[1] * count[2]);
  const absl::Status s =
      a.Read(i, start, count, ElemType::kFloat32, reinterpret_cast<uint8_t*>(out.data()));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// What reading the 2x2x2 corner of sample i of `dir`'s volumes through a
// fresh cache answers.
absl::Status ReadCorner(const std::string& dir, size_t i) {
  const absl::Status s = ReadCorner(dir, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), dir + "/v.h5: chunks of 268435456 bytes for a volume of 32");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stoker
