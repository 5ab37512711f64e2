// What the sources read object stores through: a page of a prefix's
// listing, an object's size and version, and a range of its bytes, each as
// one session's access (the endpoint its trainer named, the trainer's own
// credentials, whose request it is, and the session's cancellation).
// S3Client (s3_client.h) implements it for the S3 API; another store's
// client (GCS's JSON API, Azure Blob) would implement it beside it, and the
// object-store sources (server/sources/objects/) read it unchanged.
//
// Every call blocks its caller, never the store's own threads; each ends at
// the store's deadline, with the errors s3_client.h lists (they name the
// object, never the credentials). A request ends CANCELLED once the
// access's cancellation is raised, or `stop` (may be empty; polled) says
// so.
//
// Implementations are thread-safe.
#ifndef STOKER_SERVER_OBJSTORE_OBJECT_STORE_H_
#define STOKER_SERVER_OBJSTORE_OBJECT_STORE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/objstore/s3_address.h"
#include "server/objstore/s3_request.h"
#include "server/objstore/s3_xml.h"

namespace stoker {

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // The object's size and version, at version `if_match` when set
  // (FAILED_PRECONDITION when it changed).
  virtual absl::StatusOr<ObjectVersion> Head(const ObjectStoreAccess& access,
                                             const S3Url& object,
                                             const std::string& if_match) = 0;
  // Replaces *out with bytes [offset, offset + length) of the object
  // (length 0: all of it), at version `if_match` when set; *seen (may be
  // null) is the version read.
  virtual absl::Status Get(const ObjectStoreAccess& access, const S3Url& object,
                           uint64_t offset, uint64_t length, const std::string& if_match,
                           std::string* out, ObjectVersion* seen,
                           const std::function<bool()>& stop) = 0;
  // One page of the keys under `prefix` in `bucket` (and the prefixes one
  // `delimiter` deeper when it is set), from `token` ("" for the first), of
  // at most `max_keys` entries (0: the store's default).
  virtual absl::StatusOr<ListPage> List(const ObjectStoreAccess& access,
                                        const std::string& bucket, const std::string& prefix,
                                        const std::string& delimiter, const std::string& token,
                                        int max_keys, const std::function<bool()>& stop) = 0;
};

}  // namespace stoker

#endif  // STOKER_SERVER_OBJSTORE_OBJECT_STORE_H_
