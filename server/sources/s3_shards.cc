#include "server/sources/s3_shards.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "proto/kept.pb.h"
#include "server/dataset/sample_source.h"
#include "server/sources/s3_lister.h"
#include "server/sources/s3_shard_list.h"
#include "server/sources/tar_index.h"
#include "server/sources/webdataset.h"
#include "util/cache_key.h"
#include "util/log.h"

namespace stoker {
namespace {

constexpr int kShardsAtOnce = 16;
// One ranged GET of a shard being indexed.
constexpr uint64_t kBlockBytes = uint64_t{8} << 20;
constexpr absl::Duration kProgressEvery = absl::Seconds(5);

using Shard = ListedShard;

struct Member {
  uint32_t shard = 0;
  uint64_t offset = 0, size = 0;
};

// The L2 key of one member's bytes (the file part of its SourceKey).
std::string MemberFile(const ObjectStoreAccess& access, const std::string& bucket,
                       const Shard& shard, uint64_t offset, uint64_t size) {
  return CacheKey({"s3-tar", access.endpoint.ToString(), bucket, shard.key, offset, size});
}

class S3ShardMembers : public SampleSource {
 public:
  S3ShardMembers(S3Client* client, ObjectStoreAccess access, std::string bucket,
                 uint64_t max_bytes, std::vector<Shard> shards, std::vector<Member> members,
                 const std::vector<char>& proven)
      : client_(client),
        access_(std::move(access)),
        bucket_(std::move(bucket)),
        in_bucket_(absl::StrCat("s3://", bucket_, "/")),
        max_bytes_(max_bytes),
        shards_(std::move(shards)),
        members_(std::move(members)),
        proven_(new std::atomic<bool>[shards_.size()]),
        proving_(new absl::Mutex[shards_.size()]) {
    for (size_t i = 0; i < shards_.size(); ++i) proven_[i].store(proven[i]);
  }

  absl::StatusOr<SourceKey> Identify(const std::string& path) const override {
    absl::StatusOr<const Member*> m = Find(path);
    if (!m.ok()) return m.status();
    const Shard& shard = shards_[(*m)->shard];
    if (absl::Status s = Prove((*m)->shard); !s.ok()) return s;
    return SourceKey{MemberFile(access_, bucket_, shard, (*m)->offset, (*m)->size),
                     ObjectFileVersion(shard.size, shard.etag), nullptr};
  }

  bool Versioned() const override { return true; }
  bool remote() const override { return true; }

  absl::Status Read(const std::string& path, std::string* out,
                    FileVersion* version) const override {
    absl::StatusOr<const Member*> found = Find(path);
    if (!found.ok()) return found.status();
    const Member& m = **found;
    const Shard& shard = shards_[m.shard];
    if (m.size > max_bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          path, ": ", m.size, " bytes, over the daemon's file size cap of ", max_bytes_));
    }
    out->clear();
    ObjectVersion seen;
    absl::Status s = m.size == 0 ? absl::OkStatus()
                                 : client_->Get(access_.endpoint, S3Url{bucket_, shard.key},
                                                m.offset, m.size, shard.etag,
                                                access_.credentials, out, &seen, access_.owner);
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

 private:
  // This session's proof that it may read shard `k`: indexing it read it;
  // else one HEAD at the listed version, once (concurrent callers wait for
  // it), before any of the shard's members is served from a cache.
  absl::Status Prove(uint32_t k) const {
    if (proven_[k].load(std::memory_order_acquire)) return absl::OkStatus();
    absl::MutexLock lock(&proving_[k]);
    if (proven_[k].load(std::memory_order_acquire)) return absl::OkStatus();
    const Shard& shard = shards_[k];
    absl::StatusOr<ObjectVersion> v = client_->Head(access_.endpoint, S3Url{bucket_, shard.key},
                                                    access_.credentials, shard.etag,
                                                    access_.owner);
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

  // The member "s3://bucket/<shard key>#<n>" names.
  absl::StatusOr<const Member*> Find(const std::string& path) const {
    const size_t hash = path.rfind('#');
    uint64_t n = 0;
    if (hash == std::string::npos ||
        !absl::SimpleAtoi(absl::string_view(path).substr(hash + 1), &n) ||
        n >= members_.size() || !absl::StartsWith(path, in_bucket_) ||
        hash < in_bucket_.size() ||
        absl::string_view(path).substr(in_bucket_.size(), hash - in_bucket_.size()) !=
            shards_[members_[n].shard].key) {
      return absl::NotFoundError(absl::StrCat("no member ", Shown(path), " in this dataset"));
    }
    return &members_[n];
  }

  S3Client* const client_;
  const ObjectStoreAccess access_;
  const std::string bucket_;
  const std::string in_bucket_;  // "s3://bucket/": what every member's name starts with.
  const uint64_t max_bytes_;
  const std::vector<Shard> shards_;
  const std::vector<Member> members_;
  // This session's proofs: it has read from the shard (or its HEAD).
  const std::unique_ptr<std::atomic<bool>[]> proven_;
  const std::unique_ptr<absl::Mutex[]> proving_;
};

// A shard read forward, a block at a time, as the caller, at its listed
// version: what ForEachTarMember and the members' bytes are read from.
class ShardStream {
 public:
  // `fetched` and `progress` count the bytes read.
  ShardStream(const S3Url& object, const Shard& shard, const ObjectStoreAccess& access,
              S3Client* client, const std::function<absl::Status()>& check,
              std::atomic<uint64_t>* fetched, std::atomic<uint64_t>* requests,
              OpeningProgress* progress)
      : object_(object),
        shard_(shard),
        access_(access),
        client_(client),
        check_(check),
        fetched_(fetched),
        requests_(requests),
        progress_(progress) {}

  absl::Status Read(uint64_t offset, size_t n, char* out) {
    while (n > 0) {
      if (offset < at_ || offset >= at_ + block_.size()) {
        if (absl::Status s = Fetch(offset); !s.ok()) return s;
      }
      const size_t piece = std::min<uint64_t>(n, at_ + block_.size() - offset);
      std::copy_n(block_.data() + (offset - at_), piece, out);
      offset += piece;
      out += piece;
      n -= piece;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Fetch(uint64_t offset) {
    if (absl::Status s = check_(); !s.ok()) return s;
    if (offset >= shard_.size) return absl::DataLossError("a read past the shard's end");
    const uint64_t n = std::min(kBlockBytes, shard_.size - offset);
    ObjectVersion seen;
    requests_->fetch_add(1);
    absl::Status s = client_->Get(access_.endpoint, object_, offset, n, shard_.etag,
                                  access_.credentials, &block_, &seen, access_.owner);
    if (s.code() == absl::StatusCode::kFailedPrecondition ||
        s.code() == absl::StatusCode::kNotFound) {
      return absl::DataLossError(
          absl::StrCat("the shard changed while it was indexed (", s.message(), ")"));
    }
    if (!s.ok()) return s;
    if (block_.size() != n || !IsListedVersion(seen, shard_.size, shard_.etag)) {
      return absl::DataLossError("the shard changed while it was indexed");
    }
    at_ = offset;
    fetched_->fetch_add(n);
    progress_->Read(n);
    return absl::OkStatus();
  }

  const S3Url& object_;
  const Shard& shard_;
  const ObjectStoreAccess& access_;
  S3Client* const client_;
  const std::function<absl::Status()>& check_;
  std::atomic<uint64_t>* const fetched_;
  std::atomic<uint64_t>* const requests_;
  OpeningProgress* const progress_;
  std::string block_;
  uint64_t at_ = 0;
};

// What opening shares across the shards it indexes at once.
struct Indexing {
  const S3Url& root;
  const ObjectStoreAccess& access;
  S3Client* client;
  const ScanLimits& limits;
  const ReadAhead& ahead;
  OpeningProgress* progress;            // Bytes read, as they come.
  std::function<absl::Status()> check;  // Cancellation, the deadline, a failed shard.
  std::atomic<bool> failed{false};      // A shard failed: the others stop.
  std::atomic<uint64_t> bytes{0};       // Read so far, of every shard.
  std::atomic<uint64_t> requests{0};    // GETs that read them.
  std::atomic<uint64_t> members{0};     // Of every shard, against max_files.
  std::atomic<uint64_t> kept_ahead{0};  // Bytes handed to ahead.keep.

  // The indexes' memory, charged to the caller (limits.charge_list) while
  // the opening runs: RESOURCE_EXHAUSTED once the user has no room.
  absl::Status Charge(uint64_t bytes) {
    if (limits.charge_list == nullptr || bytes == 0) return absl::OkStatus();
    std::shared_ptr<void> token = limits.charge_list(bytes);
    absl::MutexLock lock(&mu);
    if (token == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the shards' indexes passed this user's memory for sample lists (",
          charged + bytes, " bytes so far; --max-list-bytes-per-user)"));
    }
    held.push_back(std::move(token));
    charged += bytes;
    return absl::OkStatus();
  }
  absl::Mutex mu;
  std::vector<std::shared_ptr<void>> held ABSL_GUARDED_BY(mu);
  uint64_t charged ABSL_GUARDED_BY(mu) = 0;
};

// What an index holds per sample, as it is charged.
constexpr uint64_t kIndexBytesPerSample = sizeof(kept::ShardIndex::Sample) + 16;

// Reads `shard` whole and indexes it, handing each sample's picture and
// mask to ix.ahead as they stream by.
absl::StatusOr<kept::ShardIndex> IndexShard(Indexing& ix, const Shard& shard) {
  const S3Url object{ix.root.bucket, shard.key};
  ShardStream stream(object, shard, ix.access, ix.client, ix.check, &ix.bytes, &ix.requests,
                     ix.progress);
  kept::ShardIndex index;
  // The bytes of the members of the sample being grouped, by offset.
  std::map<uint64_t, std::string> pending;
  auto keep = [&](uint64_t offset, uint64_t size) {
    auto it = pending.find(offset);
    if (it == pending.end() || size == 0) return;  // Not read ahead; an empty one is an error.
    SourceKey id{MemberFile(ix.access, ix.root.bucket, shard, offset, size),
                 ObjectFileVersion(shard.size, shard.etag), nullptr};
    ix.ahead.keep(id, std::move(it->second));
  };
  bool image_seen = false;  // The open sample's first picture has streamed by.
  WebDatasetGrouper grouper([&](WebDatasetSample sample) -> absl::Status {
    const auto [image, mask, cls] = FieldsOf(sample);
    if (image == nullptr) {
      index.set_skipped(index.skipped() + 1);
    } else {
      if (index.samples_size() % 1024 == 0) {
        if (absl::Status c = ix.Charge(1024 * kIndexBytesPerSample); !c.ok()) return c;
      }
      kept::ShardIndex::Sample* s = index.add_samples();
      s->set_image_offset(image->offset);
      s->set_image_size(image->size);
      if (mask != nullptr) {
        s->set_has_mask(true);
        s->set_mask_offset(mask->offset);
        s->set_mask_size(mask->size);
      }
      if (cls != nullptr) {
        auto text = pending.find(cls->offset);
        absl::StatusOr<int32_t> label =
            ParseLabel(text == pending.end() ? std::string() : text->second, sample.key);
        if (!label.ok()) return label.status();
        s->set_label(*label);
      }
      keep(image->offset, image->size);
      if (mask != nullptr) keep(mask->offset, mask->size);
    }
    // This sample's members, and members without a key before it.
    pending.erase(pending.begin(), pending.upper_bound(sample.fields.back().offset));
    image_seen = false;
    return absl::OkStatus();
  });
  uint64_t seen = 0;
  absl::Status s = ForEachTarMember(
      [&](uint64_t offset, size_t n, char* out) { return stream.Read(offset, n, out); },
      shard.size, ix.limits.max_files, [&](TarMember m) -> absl::Status {
        if (++seen % 4096 == 0) {
          if (absl::Status c = ix.check(); !c.ok()) return c;
        }
        if (ix.members.fetch_add(1) >= ix.limits.max_files) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "over ", ix.limits.max_files, " members in all (--max-dataset-files)"));
        }
        if (absl::Status a = grouper.Add(m); !a.ok()) return a;
        // What a sample takes, read as it streams by: a label's first
        // bytes (enough to refuse a long one); the first picture and the
        // mask, when small enough and while the read-ahead has room.
        const WebDatasetSample::Field* f = grouper.added();
        if (f == nullptr || !IsUsedField(f->extension)) return absl::OkStatus();
        const bool label = f->extension == "cls", mask = f->extension == "seg.png";
        const bool first_image = !label && !mask && !image_seen;
        image_seen = image_seen || (!label && !mask);
        uint64_t n = 0;
        if (label) {
          n = std::min(m.size, kMaxLabelBytes + 1);
        } else if ((mask || first_image) && ix.ahead.keep != nullptr &&
                   m.size <= std::min(kMostReadAhead, ix.limits.max_file_bytes)) {
          if (ix.kept_ahead.fetch_add(m.size) + m.size <= ix.ahead.most_bytes) {
            n = m.size;
          } else {
            ix.kept_ahead.fetch_sub(m.size);  // Refused: the room stays for smaller ones.
          }
        }
        if (n == 0) return absl::OkStatus();
        std::string& bytes = pending[m.offset];
        bytes.resize(n);
        return stream.Read(m.offset, n, bytes.data());
      });
  if (s.ok()) s = grouper.Finish();
  if (!s.ok()) return s;
  index.set_skipped(index.skipped() + grouper.skipped());
  return index;
}

// Whether a kept index fits `shard` (this daemon wrote it: a check, not
// a trust boundary): every member inside the shard.
bool Fits(const kept::ShardIndex& index, const Shard& shard) {
  auto inside = [&](uint64_t offset, uint64_t size) {
    return offset <= shard.size && size <= shard.size - offset;
  };
  for (const kept::ShardIndex::Sample& s : index.samples()) {
    if (!inside(s.image_offset(), s.image_size()) || s.label() < 0 ||
        (s.has_mask() && !inside(s.mask_offset(), s.mask_size()))) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool IsShardKey(const std::string& key) { return absl::EndsWithIgnoreCase(key, ".tar"); }

absl::StatusOr<Dataset> OpenS3Shards(const S3Url& url, const ShardNames& named,
                                     const ObjectStoreAccess& access, S3Client* client,
                                     const ScanLimits& limits, const KeptListing& keep,
                                     const ReadAhead& ahead, std::vector<ListedObject>* given) {
  const std::string& pattern = named.pattern.empty() ? named.manifest : named.pattern;
  absl::StatusOr<std::vector<Shard>> listed =
      ListShards(url, named, access, client, limits, given);
  if (!listed.ok()) return listed.status();
  const std::vector<Shard>& shards = *listed;
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + limits.max_time;
  // Counted where the caller sees it, else here (for the log alone).
  OpeningProgress own(start);
  OpeningProgress& progress = limits.progress != nullptr ? *limits.progress : own;
  Indexing ix{url, access, client, limits, ahead, &progress};
  std::atomic<size_t> next{0};
  uint64_t total_bytes = 0;
  for (const Shard& s : shards) total_bytes += s.size;
  progress.Shards(shards.size(), total_bytes);
  std::atomic<int64_t> logged{absl::ToUnixNanos(start)};
  ix.check = [&]() -> absl::Status {
    // Progress every few seconds, from whichever reader passes then.
    const absl::Time now = absl::Now();
    int64_t last = logged.load();
    if (now - absl::FromUnixNanos(last) >= kProgressEvery &&
        logged.compare_exchange_strong(last, absl::ToUnixNanos(now))) {
      LogInfo(absl::StrCat("indexing ", progress.Summary(url.ToString(), now)));
    }
    if (ix.failed.load()) return absl::CancelledError("another shard failed");
    if (limits.cancel != nullptr && limits.cancel->load()) {
      return absl::CancelledError("the daemon is shutting down");
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("indexing took longer than ",
                                                      absl::FormatDuration(limits.max_time),
                                                      " (--dataset-scan-timeout)"));
    }
    return absl::OkStatus();
  };
  auto kept_key = [&](const Shard& s) {
    return CacheKey({"s3-shard-index/1", access.endpoint.ToString(), url.bucket, s.key, s.etag,
                     s.size,
                     access.credentials != nullptr ? access.credentials->access_key_id : ""});
  };
  // Each shard's index, kept or read; `read` tells which were read (and so
  // proven by this session).
  std::vector<kept::ShardIndex> indexes(shards.size());
  std::vector<char> read(shards.size(), 0);  // Not vector<bool>: written by several threads.
  std::vector<absl::Status> errors(shards.size());
  auto index_one = [&](size_t i) -> absl::Status {
    const Shard& shard = shards[i];
    if (keep.values != nullptr && !keep.refresh) {
      bool taken = false;
      absl::Status charged;
      keep.values->Get(kept_key(shard), [&](absl::string_view value) {
        // Charged before it is parsed: a parsed index takes about as much.
        charged = ix.Charge(value.size());
        taken = charged.ok() && value.size() <= INT_MAX &&
                indexes[i].ParseFromArray(value.data(), static_cast<int>(value.size())) &&
                Fits(indexes[i], shard);
      });
      if (!charged.ok()) return charged;
      if (taken) {
        const uint64_t n = indexes[i].samples_size();
        if (ix.members.fetch_add(n) + n > limits.max_files) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "over ", limits.max_files, " members in all (--max-dataset-files)"));
        }
        progress.Skipped(shard.size);  // Not to be read: out of the time left.
        return absl::OkStatus();
      }
      indexes[i].Clear();
    }
    absl::StatusOr<kept::ShardIndex> index = IndexShard(ix, shard);
    if (!index.ok()) {
      return absl::Status(index.status().code(),
                          absl::StrCat("s3://", url.bucket, "/", Shown(shard.key), ": ",
                                       index.status().message()));
    }
    indexes[i] = *std::move(index);
    read[i] = 1;
    if (keep.values != nullptr) {
      keep.values->Put(kept_key(shard), indexes[i].SerializeAsString(), access.owner);
    }
    return absl::OkStatus();
  };
  RunOnThreads(std::min<int>(kShardsAtOnce, shards.size()), [&] {
    for (size_t i; (i = next.fetch_add(1)) < shards.size();) {
      errors[i] = index_one(i);
      progress.ShardDone();
      if (!errors[i].ok()) {  // The first error ends it.
        ix.failed.store(true);
        next.store(shards.size());
      }
    }
  });
  // A shard's own error, not another's stopping for it.
  const absl::Status* first = nullptr;
  for (const absl::Status& e : errors) {
    if (!e.ok() && (first == nullptr || first->code() == absl::StatusCode::kCancelled)) {
      first = &e;
    }
  }
  if (first != nullptr) return *first;
  // The samples, shard by shard, charged as they are listed.
  Dataset ds;
  ds.description = absl::StrCat("s3-shards:", url.ToString(), pattern.empty() ? "" : " ",
                                pattern, " at ", access.endpoint.ToString());
  std::vector<Member> members;
  ListCharge charge(limits);
  bool masks = true;
  std::vector<uint64_t> per_shard;  // Samples of each shard.
  for (size_t i = 0; i < shards.size(); ++i) {
    per_shard.push_back(indexes[i].samples_size());
    const std::string shard = absl::StrCat("s3://", url.bucket, "/", shards[i].key, "#");
    for (const kept::ShardIndex::Sample& s : indexes[i].samples()) {
      if (members.size() + 2 > limits.max_files) {
        return absl::ResourceExhaustedError(absl::StrCat(
            url.ToString(), ": over ", limits.max_files, " members (--max-dataset-files)"));
      }
      members.push_back({static_cast<uint32_t>(i), s.image_offset(), s.image_size()});
      Sample out{absl::StrCat(shard, members.size() - 1), s.label(), {}};
      if (s.has_mask()) {
        members.push_back({static_cast<uint32_t>(i), s.mask_offset(), s.mask_size()});
        out.more.push_back(absl::StrCat(shard, members.size() - 1));
      }
      masks = masks && s.has_mask();
      if (absl::Status cs = charge.Add(out); !cs.ok()) return cs;
      ds.samples.push_back(std::move(out));
    }
    ds.skipped_files += indexes[i].skipped();
    kept::ShardIndex().Swap(&indexes[i]);
  }
  if (absl::Status f = FinishShardDataset(url.ToString(), per_shard, masks, &ds); !f.ok()) {
    return f;
  }
  if (absl::Status cs = charge.Finish(&ds); !cs.ok()) return cs;
  ds.read_ahead_requests = ix.requests.load();
  ds.read_ahead_bytes = ix.bytes.load();
  const size_t indexed = std::count(read.begin(), read.end(), 1);
  if (indexed > 0) {
    LogInfo(absl::StrCat(url.ToString(), ": indexed ", indexed, " of ", shards.size(),
                         " shards (", ix.bytes.load() >> 20, " MiB) in ",
                         absl::FormatDuration(absl::Trunc(absl::Now() - start,
                                                          absl::Milliseconds(1)))));
  }
  ds.source = std::make_shared<S3ShardMembers>(client, access, url.bucket, limits.max_file_bytes,
                                               std::move(*listed), std::move(members), read);
  return ds;
}

}  // namespace stoker
