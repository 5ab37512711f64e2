// Where a dataset's samples are read: each source kind (server/sources)
// gives its Dataset one SampleSource, so the reader stage and the caches
// never branch on the kind (DALI's reader = loader + parser split). Encoded
// files are read whole (Identify, Read); typed arrays are read by region
// through arrays() (server/dataset/array_source.h).
//
// Implementations are immutable and thread-safe: every reader thread calls
// them concurrently.
#ifndef STOKER_SERVER_DATASET_SAMPLE_SOURCE_H_
#define STOKER_SERVER_DATASET_SAMPLE_SOURCE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/access/file_system.h"
#include "server/dataset/proofs.h"

namespace stoker {

class ArraySource;  // server/dataset/array_source.h
struct Dataset;     // server/dataset/dataset.h

// What the cache entries of one of a source's files are keyed by: the
// source's identity and the file's as the caller's own confined open saw
// it (device, inode, size, mtime and ctime ns), so two roots, two versions
// or two users' files never share an entry.
struct SourceKey {
  // The source and the file (device, inode): L2's key, whose entry records
  // the version it was read at and is checked against `version`.
  std::string file;
  FileVersion version;  // Zero for unversioned sources.
  // The descriptor the file was identified from (file sources; null for
  // others, and for a file the session proved before: Proofs): a miss
  // reads these bytes, not another open's.
  std::shared_ptr<const OpenFile> opened;
  // False: the caller has not yet shown it may read this file (an object a
  // session has not read yet). No cached copy is served for it, in any
  // tier: it is read from the source, whose read is the proof (and its
  // bytes are then kept under this key as usual).
  bool proven = true;
  // The bytes a read of it takes when it is part of the file (a shard's
  // member); 0: the whole file (version.size).
  uint64_t read_bytes = 0;
  // RAM tiers' key: the file at this version.
  std::string key() const;
  // The bytes a read of it holds: read_bytes, else the file's size.
  uint64_t read_size() const { return read_bytes > 0 ? read_bytes : version.size; }
};

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  // Stats the file through the caller's confinement (its own access check:
  // a cache hit is served only after this succeeded, or, for a key not
  // `proven`, after a read of the source) and names its entries. Errors as
  // Read's.
  virtual absl::StatusOr<SourceKey> Identify(const std::string& path) const = 0;
  // Whether the file's version can change under the daemon, so an L2 entry
  // must be validated against Identify()'s version. Sources that are local
  // and immutable while open (LMDB) are not cached in L2 at all.
  virtual bool Versioned() const = 0;
  // Replaces *out with the file's bytes; *version (may be null) is set by
  // versioned sources. Errors name the path.
  virtual absl::Status Read(const std::string& path, std::string* out,
                            FileVersion* version) const = 0;
  // Read() of the file `id` (from Identify) names: from its open
  // descriptor when it holds one, so an identified file is opened once.
  // One identified by an earlier proof (no descriptor) is opened again and
  // read only if it is still that file: else ABORTED, its proof renewed,
  // and Identify names it as it is now.
  virtual absl::Status ReadIdentified(const SourceKey& id, const std::string& path,
                                      std::string* out, FileVersion* version) const {
    return Read(path, out, version);
  }
  // Whether each read of the source is a request to a remote store (an
  // object store): a session counts those per epoch.
  virtual bool remote() const { return false; }
  // Whether `path`, read as 0 bytes, is data (a shard's kept member: an
  // empty caption, or one its sample lacks) rather than a broken file
  // (DATA_LOSS).
  virtual bool EmptyIsData(const std::string& path) const { return false; }
  // Whether the dataset's listing gave every file's size (an object
  // store's), and the bytes a read of the file fetches, as listed, at no
  // request or stat; nullopt for a name not listed, and from sources that
  // would have to look (a local file's size).
  virtual bool lists_bytes() const { return false; }
  virtual std::optional<uint64_t> ListedBytes(const std::string& path) const {
    return std::nullopt;
  }

  // A source of typed arrays (samples are read by region, not as files);
  // null for sources of encoded files.
  virtual const ArraySource* arrays() const { return nullptr; }
};

// Files through `fs` (not owned; outlives the source), read beneath
// `beneath` when it is set; a file over `max_bytes` is RESOURCE_EXHAUSTED.
// A file identified once is not opened again for `proofs.lifetime`
// (server/dataset/proofs.h): Identify answers with the proven identity and
// no descriptor, and a read of it (a miss in every cache) opens it again
// and proves it anew.
std::shared_ptr<const SampleSource> MakeFileSource(
    FileSystem* fs, std::shared_ptr<const Beneath> beneath,
    uint64_t max_bytes = kDefaultMaxFileBytes, ProofLimits proofs = {});

// Whether `ds`'s source lists its files' sizes (SampleSource::lists_bytes).
bool ListsBytes(const Dataset& ds);
// Sample i < ds.sample_count()'s bytes as its source listed them (its
// files' sum: SampleSource::ListedBytes); 0 where one is not listed (or
// they overflow), or without a source.
uint64_t ListedBytes(const Dataset& ds, uint64_t i);

}  // namespace stoker

#endif  // STOKER_SERVER_DATASET_SAMPLE_SOURCE_H_
