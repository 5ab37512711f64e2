#include "server/sources/s3_folder.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "server/dataset/sample_source.h"
#include "server/sources/folder.h"
#include "util/cache_key.h"

namespace stoker {
namespace {

constexpr int kListingsAtOnce = 16;
// Bytes of a first GET (the proof) kept for the read that follows.
constexpr size_t kStashedReads = 512;

struct Listed {
  uint64_t size = 0;
  std::string etag;
};

class S3Objects : public SampleSource {
 public:
  S3Objects(S3Client* client, ObjectStoreAccess access, std::string bucket, uint64_t max_bytes,
            std::unordered_map<std::string, Listed> listed)
      : client_(client),
        access_(std::move(access)),
        bucket_(std::move(bucket)),
        max_bytes_(max_bytes),
        listed_(std::move(listed)) {}

  absl::StatusOr<SourceKey> Identify(const std::string& path) const override {
    auto it = listed_.find(path);
    if (it == listed_.end()) {
      return absl::NotFoundError(absl::StrCat(path, " is not in the dataset's listing"));
    }
    SourceKey id{CacheKey({"s3", access_.endpoint.ToString(), bucket_, Key(path)}),
                 VersionOf(it->second), nullptr};
    {
      absl::MutexLock lock(&mu_);
      if (proven_.count(path) > 0) return id;
    }
    // The first sight of the object in this session: read it as the
    // caller (the proof), and keep the bytes for the read that follows.
    auto bytes = std::make_shared<std::string>();
    if (absl::Status s = Get(path, it->second, bytes.get()); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    proven_.insert(path);
    if (stash_.size() >= kStashedReads) {
      stashed_.erase(stash_.front());
      stash_.pop_front();
    }
    if (stashed_.emplace(path, std::move(bytes)).second) stash_.push_back(path);
    return id;
  }

  bool Versioned() const override { return true; }

  absl::Status Read(const std::string& path, std::string* out,
                    FileVersion* version) const override {
    auto it = listed_.find(path);
    if (it == listed_.end()) {
      return absl::NotFoundError(absl::StrCat(path, " is not in the dataset's listing"));
    }
    if (absl::Status s = Get(path, it->second, out); !s.ok()) return s;
    if (version != nullptr) *version = VersionOf(it->second);
    return absl::OkStatus();
  }

  absl::Status ReadIdentified(const SourceKey& id, const std::string& path, std::string* out,
                              FileVersion* version) const override {
    {
      absl::MutexLock lock(&mu_);
      auto it = stashed_.find(path);
      if (it != stashed_.end()) {
        *out = std::move(*it->second);
        stashed_.erase(it);
        stash_.erase(std::find(stash_.begin(), stash_.end(), path));
        if (version != nullptr) *version = id.version;
        return absl::OkStatus();
      }
    }
    return Read(path, out, version);
  }

 private:
  static FileVersion VersionOf(const Listed& l) {
    FileVersion v;
    v.size = l.size;
    v.mtime_ns = static_cast<int64_t>(absl::HashOf(l.etag));
    return v;
  }

  std::string Key(const std::string& path) const {
    return path.substr(std::string("s3://").size() + bucket_.size() + 1);
  }

  absl::Status Get(const std::string& path, const Listed& l, std::string* out) const {
    if (l.size > max_bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          path, ": ", l.size, " bytes, over the daemon's file size cap of ", max_bytes_));
    }
    absl::Status s = client_->Get(access_.endpoint, S3Url{bucket_, Key(path)}, 0, l.size,
                                  l.etag, access_.credentials, out);
    if (s.code() == absl::StatusCode::kFailedPrecondition) {
      return absl::DataLossError(
          absl::StrCat(path, " changed since the dataset was listed (", s.message(), ")"));
    }
    return s;
  }

  S3Client* const client_;
  const ObjectStoreAccess access_;
  const std::string bucket_;
  const uint64_t max_bytes_;
  const std::unordered_map<std::string, Listed> listed_;
  mutable absl::Mutex mu_;
  mutable std::unordered_set<std::string> proven_ ABSL_GUARDED_BY(mu_);
  mutable std::unordered_map<std::string, std::shared_ptr<std::string>> stashed_
      ABSL_GUARDED_BY(mu_);
  mutable std::deque<std::string> stash_ ABSL_GUARDED_BY(mu_);  // Oldest first.
};

// The listing's walk: pages of one prefix, checked against the limits.
class Lister {
 public:
  Lister(const S3Url& url, const ObjectStoreAccess& access, S3Client* client,
         const ScanLimits& limits)
      : url_(url), access_(access), client_(client), limits_(limits),
        deadline_(absl::Now() + limits.max_time) {}

  // Every page of `prefix` (with `delimiter`), each handed to `page`.
  absl::Status Walk(const std::string& prefix, const std::string& delimiter,
                    const std::function<absl::Status(const ListPage&)>& page) {
    std::string token;
    do {
      if (limits_.cancel != nullptr && limits_.cancel->load()) {
        return absl::CancelledError(absl::StrCat("listing ", url_.ToString(), ": shutting down"));
      }
      if (absl::Now() > deadline_) {
        return absl::DeadlineExceededError(absl::StrCat(
            "listing ", url_.ToString(), " took longer than ",
            absl::FormatDuration(limits_.max_time), " (--dataset-scan-timeout)"));
      }
      absl::StatusOr<ListPage> p = client_->List(access_.endpoint, url_.bucket, prefix,
                                                 delimiter, token, access_.credentials);
      if (!p.ok()) return p.status();
      const uint64_t seen =
          seen_.fetch_add(p->objects.size() + p->prefixes.size()) + p->objects.size() +
          p->prefixes.size();
      if (seen > limits_.max_files) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "listing ", url_.ToString(), ": over ", limits_.max_files,
            " objects (--max-dataset-files)"));
      }
      if (absl::Status s = page(*p); !s.ok()) return s;
      token = p->truncated ? p->next_token : "";
    } while (!token.empty());
    return absl::OkStatus();
  }

 private:
  const S3Url& url_;
  const ObjectStoreAccess& access_;
  S3Client* const client_;
  const ScanLimits& limits_;
  const absl::Time deadline_;
  std::atomic<uint64_t> seen_{0};
};

}  // namespace

absl::StatusOr<Dataset> OpenS3Folder(const S3Url& url, const ObjectStoreAccess& access,
                                     S3Client* client, const ScanLimits& limits) {
  S3Url root = url;
  if (!root.key.empty() && root.key.back() != '/') root.key += '/';
  Lister lister(root, access, client, limits);
  std::vector<std::string> classes;
  uint64_t skipped = 0;
  absl::Status s = lister.Walk(root.key, "/", [&](const ListPage& p) {
    for (const std::string& c : p.prefixes) classes.push_back(c);
    skipped += p.objects.size();
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  std::sort(classes.begin(), classes.end());
  if (classes.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        root.ToString(), " has no class prefixes (an ImageFolder is <prefix>/<class>/<image>)"));
  }
  // Every class listed in parallel.
  std::vector<std::vector<ListedObject>> found(classes.size());
  std::vector<absl::Status> errors(classes.size());
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < std::min<int>(kListingsAtOnce, classes.size()); ++w) {
    workers.emplace_back([&] {
      for (size_t c; (c = next.fetch_add(1)) < classes.size();) {
        errors[c] = lister.Walk(classes[c], "", [&](const ListPage& p) {
          for (const ListedObject& o : p.objects) {
            if (HasImageExtension(o.key)) found[c].push_back(o);
          }
          return absl::OkStatus();
        });
        if (!errors[c].ok()) next.store(classes.size());  // The first error ends it.
      }
    });
  }
  for (std::thread& t : workers) t.join();
  for (const absl::Status& e : errors) {
    if (!e.ok()) return e;
  }
  Dataset ds;
  ds.description = absl::StrCat("s3:", root.ToString());
  ListCharge charge(limits);
  std::unordered_map<std::string, Listed> listed;
  for (size_t c = 0; c < classes.size(); ++c) {
    std::sort(found[c].begin(), found[c].end(),
              [](const ListedObject& a, const ListedObject& b) { return a.key < b.key; });
    ds.class_names.emplace_back(absl::StripSuffix(classes[c].substr(root.key.size()), "/"));
    for (ListedObject& o : found[c]) {
      Sample sample{absl::StrCat("s3://", root.bucket, "/", o.key), static_cast<int32_t>(c), {}};
      // The sample and its identity are held: charged twice over.
      if (absl::Status cs = charge.Add(sample); !cs.ok()) return cs;
      if (absl::Status cs = charge.Add(sample); !cs.ok()) return cs;
      listed[sample.path] = Listed{o.size, std::move(o.etag)};
      ds.samples.push_back(std::move(sample));
    }
  }
  ds.skipped_files = skipped;
  ds.num_classes = static_cast<uint32_t>(classes.size());
  if (ds.samples.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(root.ToString(), " holds no .jpg, .jpeg or .png objects under its classes"));
  }
  if (absl::Status cs = charge.Finish(&ds); !cs.ok()) return cs;
  ds.source = std::make_shared<S3Objects>(client, access, root.bucket, limits.max_file_bytes,
                                          std::move(listed));
  return ds;
}

}  // namespace stoker
