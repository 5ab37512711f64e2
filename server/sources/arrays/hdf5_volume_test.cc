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
#include "server/sources/arrays/hdf5.h"
#include "server/pool/thread_pool.h"
#include "server/cache/volume_cache.h"
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

class Hdf5VolumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testdata::MakeTempDir("h5-volumes");
    // As h5py writes them (gzip, with and without shuffle), with a filter
    // only the library undoes (fletcher32), with none, and half unwritten.
    const int filters[] = {kShuffle | kDeflate, kDeflate, kShuffle | kDeflate | kFletcher,
                           kNone, kShuffle | kDeflate};
    for (int k = 0; k < 5; ++k) {
      volumes_.push_back(Volume(k));
      WriteVolume(dir_ + "/v" + std::to_string(k) + (k % 2 ? ".H5" : ".h5"), volumes_[k],
                  filters[k], /*fill=*/k == 4);
    }
    for (size_t i = 8 * 17 * 19; i < kVoxels; ++i) volumes_[4][i] = 7.5f;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Every volume's whole extent and two patches, as written.
  void ExpectExact(const ArraySource& src) {
    const uint64_t all_start[3] = {0, 0, 0}, all[3] = {13, 17, 19};
    const uint64_t p_start[3] = {3, 4, 5}, patch[3] = {6, 9, 11};
    const uint64_t e_start[3] = {9, 12, 13}, edge[3] = {4, 5, 6};  // The last chunks.
    for (size_t k = 0; k < volumes_.size(); ++k) {
      EXPECT_EQ(Read(src, k, all_start, all), volumes_[k]) << k;
      EXPECT_EQ(Read(src, k, p_start, patch), Region(volumes_[k], p_start, patch)) << k;
      EXPECT_EQ(Read(src, k, e_start, edge), Region(volumes_[k], e_start, edge)) << k;
    }
  }

  std::string dir_;
  std::vector<std::vector<float>> volumes_;
};

TEST_F(Hdf5VolumeTest, VolumesAreDecodedOnceAndPatchesAreExact) {
  ThreadPool pool("decode", 2);
  VolumeCache cache(64 << 20, [&](size_t n, const std::function<void(size_t)>& fn) {
    ParallelFor(&pool, pool.size(), n, fn);
  });
  auto src = OpenHdf5Source(dir_, "x", "", nullptr, nullptr, kDefaultMaxArraySamples, false,
                            &cache);
  ASSERT_TRUE(src.ok()) << src.status();
  ASSERT_EQ((*src)->size(), 5u);
  ExpectExact(**src);
  ExpectExact(**src);
  EXPECT_EQ(cache.decodes(), 5u);  // Once each, for 6 reads each.
  EXPECT_EQ(cache.Stats().hits(), 5u * 6 - 5);
  EXPECT_EQ(cache.oversized(), 0u);
  // Another source of the same files (another session) shares them.
  auto again = OpenHdf5Source(dir_, "x", "", nullptr, nullptr, kDefaultMaxArraySamples,
                              false, &cache);
  ASSERT_TRUE(again.ok());
  ExpectExact(**again);
  EXPECT_EQ(cache.decodes(), 5u);
  // A replaced file is another version: decoded again.
  volumes_[0] = Volume(40);
  WriteVolume(dir_ + "/new.tmp", volumes_[0], kShuffle | kDeflate);
  fs::rename(dir_ + "/new.tmp", dir_ + "/v0.h5");
  auto rewritten = OpenHdf5Source(dir_, "x", "", nullptr, nullptr, kDefaultMaxArraySamples,
                                  false, &cache);
  ASSERT_TRUE(rewritten.ok());
  ExpectExact(**rewritten);
  EXPECT_EQ(cache.decodes(), 6u);
}

TEST_F(Hdf5VolumeTest, VolumesLargerThanTheCacheAreReadByRegion) {
  VolumeCache cache(4 * kVoxels - 1);  // Not one volume fits.
  auto src = OpenHdf5Source(dir_, "x", "", nullptr, nullptr, kDefaultMaxArraySamples, false,
                            &cache);
  ASSERT_TRUE(src.ok()) << src.status();
  ExpectExact(**src);
  EXPECT_EQ(cache.decodes(), 0u);
  EXPECT_EQ(cache.oversized(), 15u);
  // Without a cache at all, the same.
  auto uncached = OpenHdf5Source(dir_, "x", "", nullptr, nullptr);
  ASSERT_TRUE(uncached.ok());
  ExpectExact(**uncached);
}

// A chunk whose stored bytes do not inflate, or inflate to the wrong
// size, is DATA_LOSS naming the file and the chunk for every read that
// touches it (never kept as filled); reads of its volume's other chunks,
// and the other volumes, are exact.
TEST_F(Hdf5VolumeTest, AHostileChunkIsAnErrorForTheReadsThatTouchIt) {
  const std::string bad = dir_ + "/v1.H5";  // Deflate only.
  {
    const hid_t f = H5Fopen(bad.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t set = H5Dopen2(f, "x", H5P_DEFAULT);
    const hsize_t at[3] = {4, 5, 6};
    const std::string junk(300, 'j');  // Not a zlib stream.
    ASSERT_GE(H5Dwrite_chunk(set, H5P_DEFAULT, 0, at, junk.size(), junk.data()), 0);
    const hsize_t at2[3] = {8, 10, 12};
    // A valid zlib stream of 10 bytes where a chunk of 480 is due.
    libdeflate_compressor* c = libdeflate_alloc_compressor(6);
    char short_stream[64];
    const size_t n = libdeflate_zlib_compress(c, "0123456789", 10, short_stream, 64);
    libdeflate_free_compressor(c);
    ASSERT_GT(n, 0u);
    ASSERT_GE(H5Dwrite_chunk(set, H5P_DEFAULT, 0, at2, n, short_stream), 0);
    H5Dclose(set);
    H5Fclose(f);
  }
  VolumeCache cache(64 << 20);
  auto src = OpenHdf5Source(dir_, "x", "", nullptr, nullptr, kDefaultMaxArraySamples, false,
                            &cache);
  ASSERT_TRUE(src.ok()) << src.status();
  auto read = [&](const uint64_t* start, const uint64_t* count) {
    std::vector<float> out(count[0] * count[1] * count[2]);
    return (*src)->Read(1, start, count, ElemType::kFloat32,
                        reinterpret_cast<uint8_t*>(out.data()));
  };
  const uint64_t start[3] = {0, 0, 0}, corner[3] = {2, 2, 2}, all[3] = {13, 17, 19};
  EXPECT_EQ(Read(**src, 1, start, corner), Region(volumes_[1], start, corner));
  for (int attempt = 0; attempt < 2; ++attempt) {  // Tried again, never kept.
    const absl::Status s = read(start, all);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_TRUE(s.message() == bad + ": chunk at [4, 5, 6] does not inflate to its size" ||
                s.message() == bad + ": chunk at [8, 10, 12] does not inflate to its size")
        << s.message();
  }
  const uint64_t at[3] = {4, 5, 6}, one[3] = {1, 1, 1};
  EXPECT_EQ(read(at, one).message(), bad + ": chunk at [4, 5, 6] does not inflate to its size");
  EXPECT_EQ(cache.decodes(), 0u);  // Volume 1 is never whole.
  EXPECT_EQ(Read(**src, 0, start, all), volumes_[0]);
  EXPECT_EQ(Read(**src, 2, start, all), volumes_[2]);
}

// A patch of a compressed volume fills only the chunks it touches; the
// volume counts as decoded once every chunk is.
TEST_F(Hdf5VolumeTest, APatchFillsOnlyTheChunksItTouches) {
  VolumeCache cache(64 << 20);
  auto src = OpenHdf5Source(dir_, "x", "", nullptr, nullptr, kDefaultMaxArraySamples, false,
                            &cache);
  ASSERT_TRUE(src.ok()) << src.status();
  const uint64_t p_start[3] = {3, 4, 5}, patch[3] = {6, 9, 11};
  EXPECT_EQ(Read(**src, 0, p_start, patch), Region(volumes_[0], p_start, patch));
  EXPECT_EQ(cache.decodes(), 0u);
  EXPECT_EQ(cache.pieces(), 27u);  // Chunks [0, 3) on every axis.
  // Charged whole from the first patch, in chunk order: 4 x 4 x 4 chunks
  // of 4 x 5 x 6 floats (the edge chunks' parts past the volume included),
  // plus the entry's key and overhead.
  EXPECT_EQ(cache.Stats().entries(), 1u);
  EXPECT_GE(cache.Stats().bytes(), 64u * 480);
  EXPECT_LT(cache.Stats().bytes(), 64u * 480 + 1024);
  // The same patch as other types, converted by value from the chunks.
  {
    std::vector<double> wide(6 * 9 * 11);
    ASSERT_TRUE((*src)
                    ->Read(0, p_start, patch, ElemType::kFloat64,
                           reinterpret_cast<uint8_t*>(wide.data()))
                    .ok());
    std::vector<int16_t> narrow(6 * 9 * 11);
    ASSERT_TRUE((*src)
                    ->Read(0, p_start, patch, ElemType::kInt16,
                           reinterpret_cast<uint8_t*>(narrow.data()))
                    .ok());
    const std::vector<float> want = Region(volumes_[0], p_start, patch);
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(wide[k], static_cast<double>(want[k])) << k;
      EXPECT_EQ(narrow[k], static_cast<int16_t>(want[k])) << k;
    }
  }
  EXPECT_EQ(cache.pieces(), 27u);  // Nothing more filled.
  // The rest of the volume: every chunk filled, exactly.
  const uint64_t start[3] = {0, 0, 0}, all[3] = {13, 17, 19};
  EXPECT_EQ(Read(**src, 0, start, all), volumes_[0]);
  EXPECT_EQ(cache.decodes(), 1u);
  EXPECT_EQ(Read(**src, 0, p_start, patch), Region(volumes_[0], p_start, patch));
  EXPECT_EQ(cache.decodes(), 1u);
}

// The chunks no patch touched are filled in the background from the
// file, exactly; a source closed before its background fill has run stops
// it (the fill holds the source weakly: nothing is read from a closed file).
TEST_F(Hdf5VolumeTest, TheRestOfAVolumeIsFilledInTheBackgroundWhileItsSourceLives) {
  VolumeCache cache(64 << 20);
  std::vector<std::function<void()>> idle;
  cache.set_background([&](std::function<void()> task) { idle.push_back(std::move(task)); });
  auto drain = [&] {
    while (!idle.empty()) {
      std::function<void()> task = std::move(idle.front());
      idle.erase(idle.begin());
      task();
    }
  };
  auto src = OpenHdf5Source(dir_, "x", "", nullptr, nullptr, kDefaultMaxArraySamples, false,
                            &cache);
  ASSERT_TRUE(src.ok()) << src.status();
  const uint64_t p_start[3] = {3, 4, 5}, patch[3] = {6, 9, 11};
  const uint64_t start[3] = {0, 0, 0}, all[3] = {13, 17, 19};
  EXPECT_EQ(Read(**src, 0, p_start, patch), Region(volumes_[0], p_start, patch));
  EXPECT_EQ(Read(**src, 1, p_start, patch), Region(volumes_[1], p_start, patch));
  ASSERT_EQ(idle.size(), 2u);  // One background fill a volume.
  // Volume 0's background runs to its end: every chunk, exactly.
  std::function<void()> first = std::move(idle[0]);
  idle.erase(idle.begin());
  std::vector<std::function<void()>> second = std::move(idle);
  idle.clear();
  first();
  drain();
  EXPECT_EQ(cache.background_pieces(), 64u - 27u);
  EXPECT_EQ(cache.decodes(), 1u);
  EXPECT_EQ(Read(**src, 0, start, all), volumes_[0]);
  EXPECT_EQ(cache.pieces(), 27u + 64u);  // The whole read filled nothing.
  // Volume 1's, after its source is gone: nothing filled.
  src->reset();
  idle = std::move(second);
  drain();
  EXPECT_EQ(cache.background_pieces(), 64u - 27u);
  EXPECT_EQ(cache.pieces(), 27u + 64u);
}

// An extendible dataset may declare chunks far larger than itself; a
// 2x2x2 volume in 256 MiB chunks is refused when its file is opened, before
// any buffer is made, as that sample's error; the folder's other volumes
// read.
TEST(Hdf5VolumeChunksTest, ChunksFarLargerThanTheVolumeAreRefused) {
  const std::string dir = testdata::MakeTempDir("h5-chunks");
  const std::vector<float> good = Volume(3);
  WriteVolume(dir + "/a.h5", good, kDeflate);
  {
    const hid_t f = H5Fcreate((dir + "/v.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[3] = {2, 2, 2}, most[3] = {H5S_UNLIMITED, H5S_UNLIMITED, H5S_UNLIMITED};
    const hsize_t chunk[3] = {4096, 4096, 4};
    const hid_t space = H5Screate_simple(3, dims, most);
    const hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(plist, 3, chunk);
    H5Pset_deflate(plist, 1);
    const hid_t set =
        H5Dcreate2(f, "x", H5T_IEEE_F32LE, space, H5P_DEFAULT, plist, H5P_DEFAULT);
    ASSERT_GE(set, 0);
    H5Dclose(set);
    H5Pclose(plist);
    H5Sclose(space);
    H5Fclose(f);
  }
  VolumeCache cache(64 << 20);
  auto src = OpenHdf5Source(dir, "x", "", nullptr, nullptr, kDefaultMaxArraySamples, false,
                            &cache);
  ASSERT_TRUE(src.ok()) << src.status();
  const uint64_t start[3] = {0, 0, 0}, count[3] = {2, 2, 2}, all[3] = {13, 17, 19};
  std::vector<float> out(8);
  const absl::Status s =
      (*src)->Read(1, start, count, ElemType::kFloat32, reinterpret_cast<uint8_t*>(out.data()));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(),
            dir + "/v.h5: dataset 'x' has chunks of 268435456 bytes for a volume of 32 "
            "(67108864 at most)");
  EXPECT_EQ(Read(**src, 0, start, all), good);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stoker
