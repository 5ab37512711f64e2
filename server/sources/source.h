// Dataset sources: one unit per kind (server/sources/<group>/<kind>.{h,cc},
// its test beside it), registered by one line in sources.def. A kind turns its
// DatasetSpec `source` case into a Dataset: the sample listing, and the
// SampleSource every read and cache key goes through (server/
// sample_source.h). The daemon, the spec helpers, confinement and the
// session ask the registry and never branch on the kind.
//
// A kind reaches files only through the confined file environment in
// SourceContext (OpenConfined, FileSystem, MapFile beneath `beneath`): a
// confined caller's dataset never reads outside the folder it proved it
// could open, nor the daemon's own files.
//
// Adding a kind: a message in proto/spec.proto's DatasetSpec.source oneof,
// a unit defining it with STOKER_DEFINE_SOURCE, one STOKER_SOURCE line.
// registry_test fails for a oneof case without a unit.
//
// Kinds are stateless singletons; Open is thread-safe.
#ifndef STOKER_SERVER_SOURCES_SOURCE_H_
#define STOKER_SERVER_SOURCES_SOURCE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/stoker.pb.h"
#include "server/dataset/array_source.h"
#include "server/dataset/dataset.h"
#include "server/access/file_system.h"
#include "server/dataset/sample_source.h"
#include "server/cache/volume_cache.h"

namespace stoker {

class ObjectStore;          // server/objstore/object_store.h
struct ObjectStoreAccess;   // server/objstore/s3_request.h

// Values a kind keeps across sessions (its listings), in the daemon's L2.
class KeptValues {
 public:
  virtual ~KeptValues() = default;
  // Calls take() with the value kept under `key` where it lies (valid
  // during the call: nothing is copied before the kind has charged it);
  // false when none is (or it is corrupt).
  virtual bool Get(const std::string& key,
                   const std::function<void(absl::string_view value)>& take) = 0;
  // Keeps `value` under `key`, charged to `owner` (a uid); best effort.
  virtual void Put(const std::string& key, std::string value, int64_t owner) = 0;
};

// Keeps bytes a kind read ahead of the session (a shard read whole to
// index it) in the daemon's caches, as the reader keeps what it reads:
// under `id` (what the kind's Identify gives for that file), charged to
// the caller.
using KeepRead = std::function<void(const SourceKey& id, std::string bytes)>;
struct ReadAhead {
  KeepRead keep;            // Null: nothing is kept ahead.
  uint64_t most_bytes = 0;  // In all, for one opening (the daemon: half of L1).
};

// What opening a source may use, all of it the caller's.
struct SourceContext {
  // Caps, cancellation and the file environment (`fs`). Its `within` and
  // `beneath` are OpenDataset's to set, from `beneath` below.
  ScanLimits limits;
  // The caller's confinement; null for admins (read anywhere).
  std::shared_ptr<const Beneath> beneath;
  // RAM a source keeps (a file or dataset held whole), charged to the
  // caller; null: none kept.
  ChargeRam charge;
  // The daemon's decoded-volume cache, shared by every session; null: none
  // (chunked or compressed volumes are read by region).
  VolumeCache* volumes = nullptr;
  // Whose the source's decodes in flight are (VolumeCache::Get's owner):
  // the caller's uid; -1 for admins (bound only by the total).
  int64_t uid = -1;
  // Object stores: the daemon's client (null: the operator listed no
  // endpoint) and the session's access, the trainer's endpoint and
  // credentials (null: none came with the request).
  ObjectStore* objects = nullptr;
  std::shared_ptr<const ObjectStoreAccess> access;
  // Values kept across sessions (null: the daemon has no L2).
  KeptValues* kept = nullptr;
  // Where read-ahead bytes go, and how many.
  ReadAhead read_ahead;

  FileSystem* fs() const { return limits.fs != nullptr ? limits.fs : FileSystem::Default(); }
  // The caller's files, whole, through fs() beneath `beneath` and capped
  // at limits.max_file_bytes, each proven for limits.proof_lifetime: the
  // source of the kinds that list files.
  // How long a file opened is proven (limits.proof_lifetime), its RAM
  // charged as the caller's lists are.
  ProofLimits Proofs() const { return ProofLimits{limits.proof_lifetime, limits.charge_list}; }
  std::shared_ptr<const SampleSource> Files() const {
    return MakeFileSource(fs(), beneath, limits.max_file_bytes, Proofs());
  }
};

class SourceKind {
 public:
  virtual ~SourceKind() = default;
  // The DatasetSpec oneof case this kind answers.
  virtual v1::DatasetSpec::SourceCase source_case() const = 0;
  // Lists the samples and sets Dataset::source. Errors name the path:
  // NOT_FOUND, FAILED_PRECONDITION (not this kind's layout, no samples),
  // PERMISSION_DENIED (outside the confinement), RESOURCE_EXHAUSTED (past
  // the limits), INVALID_ARGUMENT (a field of the kind's message).
  virtual absl::StatusOr<Dataset> Open(const v1::DatasetSpec& spec,
                                       const SourceContext& ctx) const = 0;
};

// Defines `const SourceKind& Name()` returning one static `Kind`.
#define STOKER_DEFINE_SOURCE(Name, Kind) \
  const SourceKind& Name() {             \
    static const Kind kind;              \
    return kind;                         \
  }

// Every registered kind, in sources.def order.
const std::vector<const SourceKind*>& AllSources();
// The kind of a oneof case; null for one no unit registers.
const SourceKind* FindSource(v1::DatasetSpec::SourceCase source_case);

// Opens `spec`'s source through its kind, with ctx.limits confined to
// ctx.beneath: INVALID_ARGUMENT when none is set or no kind answers it,
// else the kind's Open.
absl::StatusOr<Dataset> OpenDataset(const v1::DatasetSpec& spec, const SourceContext& ctx);

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_SOURCE_H_
