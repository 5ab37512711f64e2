// The `lmdb` source: encoded samples as the values of an LMDB environment,
// mapped read-only from its confined data file (server/sources/source.h).
#ifndef STOKER_SERVER_SOURCES_FILES_LMDB_H_
#define STOKER_SERVER_SOURCES_FILES_LMDB_H_

#include <string>

#include "absl/status/statusor.h"
#include "server/dataset/dataset.h"

namespace stoker {

// An LMDB environment of encoded samples (folder `path`). Without a
// manifest, every key "class/.../name" is a sample labelled by its first
// folder (sorted names -> 0..C-1; keys without a folder are skipped). With
// a manifest of `key<TAB>label` lines, exactly those keys are the samples.
// The data file (`path`/data.mdb, or `path` itself when it is a file) is
// opened through the file environment and mapped read-only without a lock
// file (MDB_RDONLY | MDB_NOLOCK): nothing is written, no path is followed.
// Sets Dataset::source: keys are its paths, identified by the data file
// (device, inode, size, mtime, ctime); a value over limits.max_file_bytes
// is that sample's RESOURCE_EXHAUSTED. NOT_FOUND for a missing environment;
// FAILED_PRECONDITION when empty.
absl::StatusOr<Dataset> LoadLmdbDataset(const std::string& path,
                                        const std::string& manifest,
                                        const ScanLimits& limits = {});

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_FILES_LMDB_H_
