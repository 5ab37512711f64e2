// The `list` source: a manifest of files and labels (several files per
// sample for image + mask), read through the caller's confinement
// (server/sources/source.h).
#ifndef STOKER_SERVER_SOURCES_FILES_LIST_H_
#define STOKER_SERVER_SOURCES_FILES_LIST_H_

#include <string>

#include "absl/status/statusor.h"
#include "server/dataset/dataset.h"

namespace stoker {

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

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_FILES_LIST_H_
