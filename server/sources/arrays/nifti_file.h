// NIfTI-1 and NIfTI-2 volumes (.nii, and gzip-compressed .nii.gz) for the
// nifti source kind: the header parsed and checked, and a volume decoded
// whole, in the axis order and values nibabel gives.
//
// Axes are nibabel's: a volume of dim = (x, y, z, ...) is the row-major
// array of shape (x, y, z, ...), element [i, j, k] the voxel (i, j, k),
// as `np.asarray(nib.load(f).dataobj)`. The file stores x fastest
// (Fortran order); Decode reorders while it copies. Where the header
// scales (scl_slope not 0, 1 or non-finite; or scl_inter not 0), values
// are raw * slope + inter computed in double and stored as float32
// (float64 data stays float64): bit for bit what nibabel's
// `get_fdata(dtype=np.float32)` returns.
//
// Everything comes from a file the trainer wrote: dimensions, datatype and
// offsets are checked (overflow included) before any size is used, a
// gzip stream must inflate to exactly what its header declares, and the
// file must not have changed between the header's read and the volume's.
// Files are opened through the caller's confinement (OpenConfined).
//
// Stateless functions; thread-safe.
#ifndef STOKER_SERVER_SOURCES_ARRAYS_NIFTI_FILE_H_
#define STOKER_SERVER_SOURCES_ARRAYS_NIFTI_FILE_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/dataset/array_source.h"
#include "server/access/file_system.h"
#include "server/cache/volume_cache.h"

namespace stoker {
namespace nifti {

// The largest volume a header may declare (decoded bytes): past it the
// header is refused as implausible before anything is sized from it.
inline constexpr uint64_t kMostVolumeBytes = uint64_t{1} << 40;
// The most bytes between the header and the voxels (NIfTI extensions): a
// gzip stream is inflated through them, so a vox_offset past this is
// refused before any buffer is sized from it.
inline constexpr uint64_t kMostExtensionBytes = uint64_t{64} << 20;

struct Header {
  int version = 1;              // 1 or 2.
  bool gzip = false;            // Stored as a gzip stream (ReadHeader's finding).
  std::vector<uint64_t> shape;  // dim[1 .. dim[0]]: (x, y, z, ...).
  ElemType stored = ElemType::kUint8;  // The file's datatype.
  ElemType type = ElemType::kUint8;    // A decoded voxel's: stored, or float when scaled.
  bool scaled = false;
  double slope = 1, inter = 0;
  uint64_t data_offset = 0;  // vox_offset.
  uint64_t data_bytes = 0;   // Stored voxels' bytes.
  uint64_t volume_bytes = 0;  // Decoded voxels' bytes.
  // Voxel (i, j, k) to world millimetres, row-major 3 x 4: the sform when
  // sform_code > 0, else the qform when qform_code > 0, else the shape and
  // pixdim's (nibabel's get_best_affine).
  std::array<double, 12> affine{};
};

// Parses the first bytes of an uncompressed NIfTI stream (at least 348 for
// NIfTI-1, 540 for NIfTI-2). FAILED_PRECONDITION naming what is wrong: not
// NIfTI, a two-file pair (.hdr/.img), big-endian, a datatype that is not a
// plain number (RGB, complex, binary), a dimension of 0 or past 7, a
// voxel offset that is not a byte offset or leaves more than
// kMostExtensionBytes after the header, a volume over kMostVolumeBytes.
absl::StatusOr<Header> ParseHeader(const uint8_t* data, size_t size);

// Whether `data` starts a gzip stream.
bool IsGzip(const uint8_t* data, size_t size);

// Reads and checks the header of `path`, opened by OpenConfined beneath
// `beneath` (a regular file, inside the confinement): gzip streams are
// inflated as far as the header. FAILED_PRECONDITION naming the file for an
// uncompressed file shorter than its header's voxel offset plus voxels, or
// a compressed one larger than a gzip of its volume can be (a sparse file
// is never read whole); `*version` (may be null) receives its version.
absl::StatusOr<Header> ReadHeader(const std::string& path, const Beneath* beneath,
                                  FileVersion* version);

// Reads `path` (beneath `beneath`): an uncompressed file's voxels, or a
// gzip file (h.gzip) inflated as it is read (server/sources/arrays/gzip_stream.h);
// and writes its volume into `out` (h.volume_bytes), reordered to
// nibabel's axes and scaled as above, the reorder spread over `parallel`.
// The voxels come slab by slab (at most 4 MiB of them, in the file's
// order), each reordered into its place: a decode holds that slab and a
// 256 KiB input buffer besides `out`, never the file or its voxels whole.
// DATA_LOSS naming the file when it is not `version` any more (or its
// header is not `h`), or when a gzip stream does not inflate to exactly
// its header's size.
absl::Status Decode(const std::string& path, const Beneath* beneath, const Header& h,
                    const FileVersion& version, const VolumeCache::Parallel& parallel,
                    uint8_t* out);

// The region [start, start + count) (nibabel's axes) of an uncompressed
// volume whose file is mapped at `file`, as `to`: what a volume too large
// for the volume cache costs per patch. DATA_LOSS naming `what` when the
// file no longer holds the voxels.
absl::Status ReadRegion(const std::string& what, const Mapping& file, const Header& h,
                        const uint64_t* start, const uint64_t* count, ElemType to,
                        uint8_t* dst);

// Reorders (Fortran to C order) and scales the stored voxels at `src`, of
// `shape` (x fastest) and type h.stored, into `out` as h.type, row-major
// (x slowest). Exposed for tests and for regions read from a mapping.
void Reorder(const uint8_t* src, const std::vector<uint64_t>& shape, const Header& h,
             const VolumeCache::Parallel& parallel, uint8_t* out);

}  // namespace nifti
}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_ARRAYS_NIFTI_FILE_H_
