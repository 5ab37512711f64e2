#include "server/sources/objects/s3_shard_members.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/sources/objects/s3_lister.h"
#include "server/sources/shards/tar_index.h"
#include "util/cache_key.h"

namespace stoker {

std::string ShardMemberName(const std::string& in_shard, uint64_t offset, uint64_t size,
                            const std::string& kept) {
  return absl::StrCat(in_shard, offset, "+", size, kept.empty() ? "" : ".", kept);
}

std::string ShardMemberFile(const ObjectStoreAccess& access, const std::string& bucket,
                            const ListedShard& shard, uint64_t offset, uint64_t size) {
  return CacheKey({"s3-tar", access.endpoint.ToString(), bucket, shard.key, offset, size});
}

S3ShardMembers::S3ShardMembers(ObjectStore* client, ObjectStoreAccess access, std::string bucket,
                               uint64_t max_bytes, std::vector<ListedShard> shards)
    : client_(client),
      access_(std::move(access)),
      bucket_(std::move(bucket)),
      in_bucket_(absl::StrCat("s3://", bucket_, "/")),
      max_bytes_(max_bytes),
      shards_(std::move(shards)),
      proven_(new std::atomic<bool>[shards_.size()]),
      proving_(new absl::Mutex[shards_.size()]) {
  for (size_t i = 0; i < shards_.size(); ++i) {
    proven_[i].store(false);
    by_key_.emplace(shards_[i].key, static_cast<uint32_t>(i));
  }
}

absl::StatusOr<SourceKey> S3ShardMembers::Identify(const std::string& path) const {
  absl::StatusOr<Member> m = Find(path);
  if (!m.ok()) return m.status();
  const ListedShard& shard = shards_[m->shard];
  if (absl::Status s = Prove(m->shard); !s.ok()) return s;
  SourceKey id{ShardMemberFile(access_, bucket_, shard, m->offset, m->size),
               ObjectFileVersion(shard.size, shard.etag), nullptr};
  id.read_bytes = std::max<uint64_t>(m->size, 1);
  return id;
}

absl::Status S3ShardMembers::Read(const std::string& path, std::string* out,
                                  FileVersion* version) const {
  absl::StatusOr<Member> found = Find(path);
  if (!found.ok()) return found.status();
  const Member& m = *found;
  const ListedShard& shard = shards_[m.shard];
  if (m.size > max_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        path, ": ", m.size, " bytes, over the daemon's file size cap of ", max_bytes_));
  }
  out->clear();
  ObjectVersion seen;
  absl::Status s = m.size == 0 ? absl::OkStatus()
                               : client_->Get(access_, S3Url{bucket_, shard.key}, m.offset,
                                              m.size, shard.etag, out, &seen, nullptr);
  if (s.code() == absl::StatusCode::kFailedPrecondition ||
      s.code() == absl::StatusCode::kNotFound) {
    return absl::DataLossError(absl::StrCat(
        path, ": its shard ",
        s.code() == absl::StatusCode::kNotFound ? "was removed" : "changed",
        " since it was indexed (", s.message(), "): open the dataset again"));
  }
  if (!s.ok()) return s;
  if (m.size > 0 && (!IsListedVersion(seen, shard.size, shard.etag) || out->size() != m.size)) {
    return absl::DataLossError(absl::StrCat(
        path, ": its shard changed since it was indexed (", seen.size, " bytes now, ",
        shard.size, " listed): open the dataset again"));
  }
  if (m.size > 0) proven_[m.shard].store(true, std::memory_order_release);
  if (version != nullptr) *version = ObjectFileVersion(shard.size, shard.etag);
  return absl::OkStatus();
}

// This session's proof that it may read shard `k`: indexing it read it;
// else one HEAD at the listed version, once (concurrent callers wait for
// it), before any of the shard's members is served from a cache.
absl::Status S3ShardMembers::Prove(uint32_t k) const {
  if (proven_[k].load(std::memory_order_acquire)) return absl::OkStatus();
  absl::MutexLock lock(&proving_[k]);
  if (proven_[k].load(std::memory_order_acquire)) return absl::OkStatus();
  const ListedShard& shard = shards_[k];
  absl::StatusOr<ObjectVersion> v =
      client_->Head(access_, S3Url{bucket_, shard.key}, shard.etag);
  if (v.ok() && !IsListedVersion(*v, shard.size, shard.etag)) {
    v = absl::FailedPreconditionError(absl::StrCat(v->size, " bytes now, ETag ", v->etag));
  }
  if (v.status().code() == absl::StatusCode::kFailedPrecondition ||
      v.status().code() == absl::StatusCode::kNotFound) {
    return absl::DataLossError(absl::StrCat(
        "s3://", bucket_, "/", Shown(shard.key), " changed since it was indexed (",
        v.status().message(), "): open the dataset again"));
  }
  if (!v.ok()) return v.status();
  proven_[k].store(true, std::memory_order_release);
  return absl::OkStatus();
}

bool S3ShardMembers::EmptyIsData(const std::string& path) const {
  const absl::StatusOr<Member> m = Find(path);
  return m.ok() && m->kept;  // Not the picture's or the mask's.
}

std::optional<uint64_t> S3ShardMembers::ListedBytes(const std::string& path) const {
  absl::StatusOr<Member> m = Find(path);
  if (!m.ok()) return std::nullopt;
  return m->size;
}

// The member a MemberName names, inside one of the dataset's shards.
absl::StatusOr<S3ShardMembers::Member> S3ShardMembers::Find(const std::string& path) const {
  // "<in_bucket><shard key>#<offset>+<size>[.<kept member>]": the key may
  // hold '#' and '+', the rest neither.
  const size_t hash = path.rfind('#');
  const size_t plus = path.find('+', hash == std::string::npos ? path.size() : hash);
  const size_t dot = path.find('.', plus == std::string::npos ? path.size() : plus);
  // Decimal digits only: one name per member.
  auto number = [](absl::string_view digits, uint64_t* out) {
    return !digits.empty() && std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) &&
           absl::SimpleAtoi(digits, out);
  };
  Member m;
  if (hash == std::string::npos || plus == std::string::npos ||
      !absl::StartsWith(path, in_bucket_) || hash < in_bucket_.size() ||
      !number(absl::string_view(path).substr(hash + 1, plus - hash - 1), &m.offset) ||
      !number(absl::string_view(path).substr(plus + 1, dot - plus - 1), &m.size) ||
      dot + 1 == path.size()) {
    return absl::NotFoundError(absl::StrCat("no member ", Shown(path), " in this dataset"));
  }
  m.kept = dot != std::string::npos;
  auto it = by_key_.find(
      absl::string_view(path).substr(in_bucket_.size(), hash - in_bucket_.size()));
  if (it == by_key_.end() || m.offset > shards_[it->second].size ||
      m.size > shards_[it->second].size - m.offset) {
    return absl::NotFoundError(absl::StrCat("no member ", Shown(path), " in this dataset"));
  }
  m.shard = it->second;
  return m;
}

}  // namespace stoker
