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
// Thread-safe; the client outlives the source.
#ifndef STOKER_SERVER_SOURCES_S3_OBJECTS_H_
#define STOKER_SERVER_SOURCES_S3_OBJECTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "server/dataset/sample_source.h"
#include "server/objstore/s3_client.h"

namespace stoker {

// An object's listed version, and its proof bit (0..size-1, one each).
struct ListedObjectVersion {
  uint64_t size = 0;
  std::string etag;
  size_t index = 0;
};
// By "s3://bucket/key".
using ListedObjects = std::unordered_map<std::string, ListedObjectVersion>;

// The objects `listed` names in `bucket`, read with `access`.
// `kept_listing`: when a kept listing taken was made (its errors then say
// how to list again); empty: listed now.
std::shared_ptr<const SampleSource> MakeS3Objects(S3Client* client, ObjectStoreAccess access,
                                                  std::string bucket, uint64_t max_bytes,
                                                  ListedObjects listed,
                                                  std::string kept_listing);

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_S3_OBJECTS_H_
