// A dataset's sample list: paths and integer labels, scanned once when a
// session opens. Immutable after Load*, so one Dataset may be shared
// read-only by any number of threads and sessions.
#ifndef STOKER_SERVER_DATASET_H_
#define STOKER_SERVER_DATASET_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/file_system.h"
#include "server/lmdb_env.h"

namespace stoker {

class ArraySource;   // server/array_source.h
class SampleSource;  // server/sample_source.h

// Most files one sample may have (a manifest line's paths).
inline constexpr size_t kMaxFilesPerSample = 8;

struct Sample {
  std::string path;  // File path, or the key in an LMDB dataset.
  int32_t label;
  std::vector<std::string> more;  // A manifest's further files (a mask...).
  // File `k` of the sample (0: path).
  const std::string& file(size_t k) const { return k == 0 ? path : more[k - 1]; }
};

struct Dataset {
  std::string description;  // "folder:/data/train", for logs and stats.
  std::vector<Sample> samples;
  std::vector<std::string> class_names;  // FOLDER: index = label.
  uint32_t num_classes = 0;
  uint64_t skipped_files = 0;  // Non-image files seen while scanning.
  uint32_t files_per_sample = 1;
  // Set when the dataset is confined to a folder its client proved it could
  // open: every read and stat stays beneath it.
  std::shared_ptr<const Beneath> beneath;
  // Where the samples' files are read (files, confined or not, or the
  // LMDB environment); set by the daemon when it opens the dataset.
  std::shared_ptr<const SampleSource> files;
  // Set for LMDB datasets (the daemon makes it the source), with the
  // identity of its data file (device:inode:size:mtime) for cache keys.
  std::shared_ptr<const LmdbEnv> lmdb;
  std::string lmdb_identity;
  // Set for npy/HDF5 datasets: samples are typed arrays read from here
  // (sample.path is the sample's name, e.g. "file.npy[7]").
  std::shared_ptr<const ArraySource> arrays;

};

// Bounds on a folder scan (a folder may be huge, slow, or loop through
// symlinks).
struct ScanLimits {
  uint64_t max_files = 20'000'000;  // Directory entries seen in all.
  absl::Duration max_time = absl::Minutes(10);
  const std::atomic<bool>* cancel = nullptr;  // True: stop (shutdown).
  // Non-empty: a confined dataset's folder; symlinked folders that lead
  // outside it are skipped (their files are never listed).
  std::string beneath;
  // Manifests and LMDB data files are opened through the file environment,
  // beneath `within` when set (a confined caller's folder), and a manifest
  // is capped at `max_file_bytes`, `max_files` lines and `max_line_bytes`
  // per line.
  FileSystem* fs = nullptr;  // nullptr: FileSystem::Default().
  const Beneath* within = nullptr;
  uint64_t max_file_bytes = kDefaultMaxFileBytes;
  uint64_t max_line_bytes = 64 * 1024;
};

// torchvision ImageFolder layout: sorted sub-folders of `root` are classes
// 0..C-1; inside each (recursively, sorted), files ending in .jpg/.jpeg/.png
// in any case are samples, anything else is counted in skipped_files.
// Symlinks are followed; one that leads back to a folder being scanned is
// FAILED_PRECONDITION naming both. NOT_FOUND (naming the path) if `root` is
// missing, FAILED_PRECONDITION if it is not a folder or holds no samples,
// PERMISSION_DENIED naming a folder the daemon may not read,
// RESOURCE_EXHAUSTED / DEADLINE_EXCEEDED / CANCELLED past `limits`.
absl::StatusOr<Dataset> LoadFolderDataset(const std::string& root,
                                          const ScanLimits& limits = {});

// A manifest of `relative/path[<TAB>path...]<TAB>label` lines (every line
// with the same number of paths, at most kMaxFilesPerSample: a sample's
// files, e.g. image and mask); paths are relative to
// `root` (empty: the manifest's folder). '#' comments and blank lines are
// skipped. NOT_FOUND for a missing manifest; FAILED_PRECONDITION for a
// malformed line (its number is given, never its content) or no samples;
// RESOURCE_EXHAUSTED past `limits` (bytes, lines, a line's length); the
// file environment's errors for a manifest that is not a regular file, or
// outside limits.within. Labels must be in 0..2^31-1; num_classes is max
// label + 1.
absl::StatusOr<Dataset> LoadListDataset(const std::string& manifest,
                                        const std::string& root,
                                        const ScanLimits& limits = {});

// An LMDB environment of encoded samples (folder `path`). Without a
// manifest, every key "class/.../name" is a sample labelled by its first
// folder (sorted names -> 0..C-1; keys without a folder are skipped). With
// a manifest of `key<TAB>label` lines, exactly those keys are the samples.
// The data file (`path`/data.mdb, or `path` itself when it is a file) is
// opened through the file environment and mapped read-only without a lock
// file (MDB_RDONLY | MDB_NOLOCK): nothing is written, no path is followed.
// NOT_FOUND for a missing environment; FAILED_PRECONDITION when empty.
absl::StatusOr<Dataset> LoadLmdbDataset(const std::string& path,
                                        const std::string& manifest,
                                        const ScanLimits& limits = {});

// True for names ending in .jpg / .jpeg / .png, any case (the content, not
// the name, picks the decoder).
bool HasImageExtension(const std::string& name);

}  // namespace stoker

#endif  // STOKER_SERVER_DATASET_H_
