#include "server/sources/objects/s3_objects.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/sources/objects/s3_lister.h"
#include "util/cache_key.h"

namespace stoker {

S3Objects::S3Objects(ObjectStore* client, ObjectStoreAccess access, std::string bucket,
                     uint64_t max_bytes, ListedObjects listed, std::string kept_listing)
    : kept_listing_(std::move(kept_listing)),
      client_(client),
      access_(std::move(access)),
      bucket_(std::move(bucket)),
      max_bytes_(max_bytes) {
  objects_.reserve(listed.size());
  for (auto& [path, l] : listed) objects_.try_emplace(path, l.size, std::move(l.etag));
}

void S3Objects::Add(std::vector<std::pair<std::string, ListedObjectVersion>> objects) {
  absl::MutexLock lock(&mu_);
  objects_.reserve(objects_.size() + objects.size());
  for (auto& [path, l] : objects) objects_.try_emplace(std::move(path), l.size, std::move(l.etag));
}

absl::StatusOr<const S3Objects::Object*> S3Objects::Find(const std::string& path) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = objects_.find(path);
  if (it == objects_.end()) {
    return absl::NotFoundError(absl::StrCat(path, " is not in the dataset's listing"));
  }
  return &it->second;  // A node of its own: it stays where it is as others are added.
}

std::optional<uint64_t> S3Objects::ListedBytes(const std::string& path) const {
  absl::StatusOr<const Object*> o = Find(path);
  if (!o.ok()) return std::nullopt;
  return (*o)->listed.size;
}

absl::StatusOr<SourceKey> S3Objects::Identify(const std::string& path) const {
  absl::StatusOr<const Object*> o = Find(path);
  if (!o.ok()) return o.status();
  const ListedObjectVersion& l = (*o)->listed;
  SourceKey id{CacheKey({"s3", access_.endpoint.ToString(), bucket_, Key(path)}),
               ObjectFileVersion(l.size, l.etag), nullptr};
  // Until this session has read the object with its own credentials, no
  // cached copy is served to it: its first read is the proof, kept for
  // the session (a bit per object), at no extra request.
  id.proven = (*o)->proven.load(std::memory_order_acquire);
  return id;
}

absl::Status S3Objects::Read(const std::string& path, std::string* out,
                             FileVersion* version) const {
  absl::StatusOr<const Object*> o = Find(path);
  if (!o.ok()) return o.status();
  const ListedObjectVersion& l = (*o)->listed;
  if (l.size > max_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        path, ": ", l.size, " bytes, over the daemon's file size cap of ", max_bytes_));
  }
  ObjectVersion seen;
  absl::Status s =
      client_->Get(access_, S3Url{bucket_, Key(path)}, 0, l.size, l.etag, out, &seen, nullptr);
  if (!s.ok()) return Changed(path, s);
  if (l.size == 0) seen.size = 0;
  if (absl::Status m = Matches(path, l, seen); !m.ok()) return m;
  (*o)->proven.store(true, std::memory_order_release);
  if (version != nullptr) *version = ObjectFileVersion(l.size, l.etag);
  return absl::OkStatus();
}

std::string S3Objects::Key(const std::string& path) const {
  return path.substr(std::string("s3://").size() + bucket_.size() + 1);
}

// What the store answered against the listing: a store that ignored
// If-Match must not have another version's bytes taken for this one.
absl::Status S3Objects::Matches(const std::string& path, const ListedObjectVersion& l,
                                const ObjectVersion& v) const {
  if (IsListedVersion(v, l.size, l.etag)) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(path, " changed since the dataset was listed (",
                                          v.size, " bytes now, ", l.size, " listed)",
                                          RefreshHint()));
}

// An object changed (412) or removed (404) since the listing.
absl::Status S3Objects::Changed(const std::string& path, const absl::Status& s) const {
  if (s.code() != absl::StatusCode::kFailedPrecondition &&
      s.code() != absl::StatusCode::kNotFound) {
    return s;
  }
  return absl::DataLossError(absl::StrCat(
      path, s.code() == absl::StatusCode::kNotFound ? " was removed" : " changed",
      " since the dataset was listed (", s.message(), ")", RefreshHint()));
}

std::string S3Objects::RefreshHint() const {
  if (kept_listing_.empty()) return "";
  return absl::StrCat("; its listing was kept from ", kept_listing_,
                      ": list it again with {\"s3\": {\"url\": ..., \"refresh\": true}}");
}

}  // namespace stoker
