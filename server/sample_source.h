// Where a dataset's encoded files come from: one SampleSource per kind
// (files through a FileSystem, confined to a folder or not; an LMDB
// environment), so the reader stage and the caches never branch on the
// kind (DALI's reader = loader + parser split; typed-array sources are
// ArraySource, array_source.h). Adding a source is one implementation and
// a line where the daemon builds datasets.
//
// Implementations are immutable and thread-safe: every reader thread calls
// them concurrently.
#ifndef STOKER_SERVER_SAMPLE_SOURCE_H_
#define STOKER_SERVER_SAMPLE_SOURCE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/dataset.h"
#include "server/file_system.h"
#include "server/lmdb_env.h"

namespace stoker {

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  // The cache key of a sample's file (unique across sources and datasets).
  virtual std::string CacheKey(const std::string& path) const = 0;
  // Whether the file's version can change under the daemon, so an L2 entry
  // must be validated against Stat(). Sources that are local and
  // immutable while open (LMDB) are not cached in L2 at all.
  virtual bool Versioned() const = 0;
  virtual absl::StatusOr<FileVersion> Stat(const std::string& path) const = 0;
  // Replaces *out with the file's bytes; *version (may be null) is set by
  // versioned sources. Errors name the path.
  virtual absl::Status Read(const std::string& path, std::string* out,
                            FileVersion* version) const = 0;
};

// Files through `fs` (not owned; outlives the source), read beneath
// `beneath` when it is set.
std::shared_ptr<const SampleSource> MakeFileSource(
    FileSystem* fs, std::shared_ptr<const Beneath> beneath);

// Values of an LMDB environment; the "path" is the key.
std::shared_ptr<const SampleSource> MakeLmdbSource(
    std::shared_ptr<const LmdbEnv> env);

}  // namespace stoker

#endif  // STOKER_SERVER_SAMPLE_SOURCE_H_
