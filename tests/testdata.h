// Test-data generation: photographic-like JPEGs (multi-octave noise with
// edges and texture, about 4 bits/pixel at quality 90, so decode costs what
// real photos cost), ImageFolder trees, manifests and deliberately broken
// files. Deterministic from the seed. Stateless functions; thread-safe.
#ifndef STOKER_TESTS_TESTDATA_H_
#define STOKER_TESTS_TESTDATA_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace stoker::testdata {

enum class Subsampling { k444, k422, k420, kGray };

// Packed RGB pixels (width * height * 3) of a photo-like image.
std::vector<uint8_t> PhotoLikeRgb(int width, int height, uint64_t seed);

// Encodes packed RGB with libjpeg-turbo.
absl::StatusOr<std::string> EncodeJpeg(const std::vector<uint8_t>& rgb,
                                       int width, int height, int quality,
                                       Subsampling sub = Subsampling::k420,
                                       bool progressive = false);

// PNG encodings of packed RGB (libspng): the kinds a decoder must read.
enum class PngKind { kRgb8, kGray8, kRgba8, kPalette8, kGray16 };
absl::StatusOr<std::string> EncodePng(const std::vector<uint8_t>& rgb,
                                      int width, int height, PngKind kind);

// An Adobe (inverted) CMYK JPEG of the RGB image, the way Photoshop writes
// them: stored K = max(R,G,B), stored C = R*255/K (likewise M, Y), so that
// R = C*K/255.
absl::StatusOr<std::string> EncodeCmykJpeg(const std::vector<uint8_t>& rgb,
                                           int width, int height, int quality);

// A progressive JPEG cut after its first `scans` scans and closed with an
// end-of-image marker: legal, and decoded without a warning, but with
// coefficients left unsent (so libjpeg smooths its blocks). INVALID_ARGUMENT
// for a file that is not a progressive JPEG with more scans than that.
absl::StatusOr<std::string> FirstScans(const std::string& jpeg, int scans);

// A tar archive written header by header as Python's tarfile and GNU tar
// write them (ustar with a prefix for long folders, GNU long names, pax
// records): WebDataset shards for tests.
class TarWriter {
 public:
  // A member of `type` ('0' a file, '2' a symlink, '5' a folder...).
  TarWriter& Add(const std::string& name, const std::string& data, char type = '0');
  // A GNU long name ('L') for the next member.
  TarWriter& LongName(const std::string& name);
  // A pax header ('x') of "key=value" records for the next member.
  TarWriter& Pax(const std::vector<std::string>& records);
  // The archive: two zero blocks, then zeros to a 10240-byte record.
  std::string Close() const;
  // The bytes so far, for tests that damage them; Reseal(offset) writes the
  // checksum of the (edited) header at `offset` again.
  std::string& bytes() { return bytes_; }
  void Reseal(size_t offset);

 private:
  void Header(const std::string& name, const std::string& prefix, uint64_t size, char type);
  void Data(const std::string& data);
  std::string bytes_;
};

absl::Status WriteFile(const std::string& path, const std::string& bytes);

struct FolderSpec {
  int classes = 3;
  int per_class = 4;
  int min_side = 300;  // Image sides vary in [min_side, max_side].
  int max_side = 500;
  int quality = 90;
  uint64_t seed = 1;
  // Called after each image with (written, total) and its size in bytes.
  std::function<void(int, int, size_t)> progress;
};

// Writes root/class_XX/img_YYYY.jpg. Returns the sample paths in the order
// an ImageFolder scan yields them (sorted classes, sorted files).
absl::StatusOr<std::vector<std::string>> MakeFolderDataset(
    const std::string& root, const FolderSpec& spec);

// Broken files, in `dir`: zero bytes, a truncated JPEG, garbage bytes, a
// PNG-signature file named .jpg. Returns their paths.
absl::StatusOr<std::vector<std::string>> MakeBadFiles(const std::string& dir,
                                                      uint64_t seed);

// A single-file NIfTI volume (`version` 1 or 2) of `dims` (x first) and
// NIfTI `datatype`, its `voxels` (x fastest) after the header at the
// first offset allowed; scl_slope and scl_inter as given, pixdim 1.
std::string NiftiBytes(int version, const std::vector<int64_t>& dims, int datatype,
                       const std::string& voxels, double slope = 0, double inter = 0);

// `plain` as a gzip stream (one member), at libdeflate's `level` (nibabel
// writes .nii.gz at zlib's 1).
std::string Gzip(const std::string& plain, int level = 6);

// A fresh, unique directory under /tmp (short enough for socket paths).
std::string MakeTempDir(const std::string& tag);

}  // namespace stoker::testdata

#endif  // STOKER_TESTS_TESTDATA_H_
