// What a file's name or first bytes say it holds: the signatures and
// suffixes (in any case) of the array formats the daemon reads. Shared by
// the daemon (a folder's files: by name, else by content) and the client
// (a path's source kind), so both read a file the same way.
//
// Pure functions; thread-safe.
#ifndef STOKER_UTIL_FILE_KINDS_H_
#define STOKER_UTIL_FILE_KINDS_H_

#include <cstdint>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace stoker {

// Bytes enough for every signature below.
inline constexpr size_t kKindHeadBytes = 8;

// NumPy's .npy magic.
inline bool NpyHead(absl::string_view head) { return absl::StartsWith(head, "\x93NUMPY"); }
// HDF5's superblock signature at the file's start (no user block).
inline bool Hdf5Head(absl::string_view head) {
  return absl::StartsWith(head, absl::string_view("\x89HDF\r\n\x1a\n", 8));
}
// A gzip stream (a .nii.gz volume; a manifest is text).
inline bool GzipHead(absl::string_view head) { return absl::StartsWith(head, "\x1f\x8b"); }
// A NIfTI-1 or NIfTI-2 header's first field (sizeof_hdr, little-endian).
inline bool NiftiHead(absl::string_view head) {
  if (head.size() < 4) return false;
  uint32_t first;
  std::memcpy(&first, head.data(), 4);
  return first == 348 || first == 540;
}

inline bool NpyName(absl::string_view name) { return absl::EndsWithIgnoreCase(name, ".npy"); }
inline bool Hdf5Name(absl::string_view name) {
  return absl::EndsWithIgnoreCase(name, ".h5") || absl::EndsWithIgnoreCase(name, ".hdf5");
}
inline bool NiftiName(absl::string_view name) {
  return absl::EndsWithIgnoreCase(name, ".nii") || absl::EndsWithIgnoreCase(name, ".nii.gz");
}

}  // namespace stoker

#endif  // STOKER_UTIL_FILE_KINDS_H_
