#include "server/sources/s3_objects.h"

#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/sources/s3_lister.h"
#include "util/cache_key.h"

namespace stoker {
namespace {

class S3Objects : public SampleSource {
 public:
  // `kept_listing`: when the listing taken was made (empty: listed now).
  S3Objects(S3Client* client, ObjectStoreAccess access, std::string bucket, uint64_t max_bytes,
            ListedObjects listed, std::string kept_listing)
      : kept_listing_(std::move(kept_listing)),
        client_(client),
        access_(std::move(access)),
        bucket_(std::move(bucket)),
        max_bytes_(max_bytes),
        listed_(std::move(listed)),
        proven_(new std::atomic<bool>[listed_.size()]()) {}

  absl::StatusOr<SourceKey> Identify(const std::string& path) const override {
    auto it = listed_.find(path);
    if (it == listed_.end()) {
      return absl::NotFoundError(absl::StrCat(path, " is not in the dataset's listing"));
    }
    const ListedObjectVersion& l = it->second;
    SourceKey id{CacheKey({"s3", access_.endpoint.ToString(), bucket_, Key(path)}),
                 ObjectFileVersion(l.size, l.etag), nullptr};
    // Until this session has read the object with its own credentials, no
    // cached copy is served to it: its first read is the proof, kept for
    // the session (a bit per object), at no extra request.
    id.proven = proven_[l.index].load(std::memory_order_acquire);
    return id;
  }

  bool Versioned() const override { return true; }
  bool remote() const override { return true; }

  absl::Status Read(const std::string& path, std::string* out,
                    FileVersion* version) const override {
    auto it = listed_.find(path);
    if (it == listed_.end()) {
      return absl::NotFoundError(absl::StrCat(path, " is not in the dataset's listing"));
    }
    const ListedObjectVersion& l = it->second;
    if (l.size > max_bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          path, ": ", l.size, " bytes, over the daemon's file size cap of ", max_bytes_));
    }
    ObjectVersion seen;
    absl::Status s = client_->Get(access_.endpoint, S3Url{bucket_, Key(path)}, 0, l.size, l.etag,
                                  access_.credentials, out, &seen, access_.owner);
    if (!s.ok()) return Changed(path, s);
    if (l.size == 0) seen.size = 0;
    if (absl::Status m = Matches(path, l, seen); !m.ok()) return m;
    proven_[l.index].store(true, std::memory_order_release);
    if (version != nullptr) *version = ObjectFileVersion(l.size, l.etag);
    return absl::OkStatus();
  }

 private:
  std::string Key(const std::string& path) const {
    return path.substr(std::string("s3://").size() + bucket_.size() + 1);
  }

  // What the store answered against the listing: a store that ignored
  // If-Match must not have another version's bytes taken for this one.
  absl::Status Matches(const std::string& path, const ListedObjectVersion& l, const ObjectVersion& v) const {
    if (IsListedVersion(v, l.size, l.etag)) return absl::OkStatus();
    return absl::DataLossError(absl::StrCat(path, " changed since the dataset was listed (",
                                            v.size, " bytes now, ", l.size, " listed)",
                                            RefreshHint()));
  }

  // An object changed (412) or removed (404) since the listing.
  absl::Status Changed(const std::string& path, const absl::Status& s) const {
    if (s.code() != absl::StatusCode::kFailedPrecondition &&
        s.code() != absl::StatusCode::kNotFound) {
      return s;
    }
    return absl::DataLossError(absl::StrCat(
        path, s.code() == absl::StatusCode::kNotFound ? " was removed" : " changed",
        " since the dataset was listed (", s.message(), ")", RefreshHint()));
  }

  std::string RefreshHint() const {
    if (kept_listing_.empty()) return "";
    return absl::StrCat("; its listing was kept from ", kept_listing_,
                        ": list it again with {\"s3\": {\"url\": ..., \"refresh\": true}}");
  }

  const std::string kept_listing_;
  S3Client* const client_;
  const ObjectStoreAccess access_;
  const std::string bucket_;
  const uint64_t max_bytes_;
  const ListedObjects listed_;
  // This session's proofs (objects it has read), a bit per object.
  const std::unique_ptr<std::atomic<bool>[]> proven_;
};

}  // namespace

std::shared_ptr<const SampleSource> MakeS3Objects(S3Client* client, ObjectStoreAccess access,
                                                  std::string bucket, uint64_t max_bytes,
                                                  ListedObjects listed,
                                                  std::string kept_listing) {
  return std::make_shared<S3Objects>(client, std::move(access), std::move(bucket), max_bytes,
                                     std::move(listed), std::move(kept_listing));
}

}  // namespace stoker
