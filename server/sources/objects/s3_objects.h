// The samples of the object store kinds that read whole objects (s3.h's
// ImageFolder, s3_manifest.h's manifests): objects named
// "s3://bucket/key", each read as the caller at the version it was listed
// at.
//
// Identify makes no request; until this session has read an object with
// its own credentials, its key is not `proven` (SourceKey), so no cached
// copy is served and the object is read: a GET at the listed version
// (If-Match), the answered size and ETag compared with the listing. That
// read is the proof, kept by the source (one per session) as a bit per
// object, so a cold sample costs one request and a cached one none. An
// object changed or removed since it was listed is that sample's
// DATA_LOSS; one over the daemon's file size cap RESOURCE_EXHAUSTED; a
// name not listed NOT_FOUND. Cache entries are keyed by (endpoint,
// bucket, key) at (size, a digest of the ETag that is the same in every
// process).
//
// A dataset still being listed (a streamed opening) adds its objects as
// they are listed, each before any sample naming it is published.
//
// Thread-safe; the client outlives the source.
#ifndef STOKER_SERVER_SOURCES_OBJECTS_S3_OBJECTS_H_
#define STOKER_SERVER_SOURCES_OBJECTS_S3_OBJECTS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/dataset/sample_source.h"
#include "server/objstore/object_store.h"
#include "server/sources/objects/s3_lister.h"

namespace stoker {

// An object's listed version.
struct ListedObjectVersion {
  uint64_t size = 0;
  std::string etag;
};
// By "s3://bucket/key".
using ListedObjects = std::unordered_map<std::string, ListedObjectVersion>;

class S3Objects : public ObjectStoreSource {
 public:
  // The objects `listed` names in `bucket`, read with `access`.
  // `kept_listing`: when a kept listing taken was made (its errors then
  // say how to list again); empty: listed now.
  S3Objects(ObjectStore* client, ObjectStoreAccess access, std::string bucket, uint64_t max_bytes,
            ListedObjects listed, std::string kept_listing);

  // Objects listed since, by "s3://bucket/key" (a name given twice keeps
  // its first version).
  void Add(std::vector<std::pair<std::string, ListedObjectVersion>> objects);

  absl::StatusOr<SourceKey> Identify(const std::string& path) const override;
  absl::Status Read(const std::string& path, std::string* out,
                    FileVersion* version) const override;
  bool lists_bytes() const override { return true; }
  std::optional<uint64_t> ListedBytes(const std::string& path) const override;

 private:
  struct Object {
    Object(uint64_t size, std::string etag) : listed{size, std::move(etag)} {}
    const ListedObjectVersion listed;
    // This session has read it with its own credentials.
    mutable std::atomic<bool> proven{false};
  };
  // The object listed as `path` (it never moves); NOT_FOUND if none.
  absl::StatusOr<const Object*> Find(const std::string& path) const;
  std::string Key(const std::string& path) const;
  absl::Status Matches(const std::string& path, const ListedObjectVersion& l,
                       const ObjectVersion& v) const;
  absl::Status Changed(const std::string& path, const absl::Status& s) const;
  std::string RefreshHint() const;

  const std::string kept_listing_;
  ObjectStore* const client_;
  const ObjectStoreAccess access_;
  const std::string bucket_;
  const uint64_t max_bytes_;
  mutable absl::Mutex mu_;
  std::unordered_map<std::string, Object> objects_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_OBJECTS_S3_OBJECTS_H_
