#include "server/sources/objects/s3_lister.h"

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "util/checksum.h"
#include "util/status_macros.h"

namespace stoker {

Lister::Lister(const S3Url& url, const ObjectStoreAccess& access, ObjectStore* client,
               const ScanLimits& limits)
    : url_(url), access_(access), client_(client), limits_(limits),
      deadline_ns_(absl::ToUnixNanos(absl::Now() + limits.max_time)) {}

Lister::Lister(const S3Url& url, const ObjectStoreAccess& access, ObjectStore* client,
               const ScanLimits& limits, const Lister& before)
    : url_(url), access_(access), client_(client), limits_(limits),
      deadline_ns_(before.deadline_ns_.load()), seen_(before.seen_.load()) {}

void Lister::BoundByStalls() {
  by_stalls_.store(true);
  deadline_ns_.store(absl::ToUnixNanos(absl::Now() + limits_.max_time));
}

absl::Status Lister::See(uint64_t n) {
  return seen_.fetch_add(n) + n > limits_.max_files ? TooMany() : absl::OkStatus();
}

absl::Status Lister::Count(uint64_t n) {
  STOKER_RETURN_IF_ERROR(See(n));
  if (limits_.progress != nullptr) limits_.progress->Listed(n);
  return absl::OkStatus();
}

absl::Status Lister::TooMany() const {
  return absl::ResourceExhaustedError(absl::StrCat(
      "listing ", url_.ToString(), ": over ", limits_.max_files,
      " objects (--max-dataset-files)"));
}

absl::StatusOr<ListPage> Lister::Page(const std::string& prefix, const std::string& delimiter,
                                      const std::string& token, int max_keys, bool counted) {
  if (limits_.cancel != nullptr && limits_.cancel->load()) {
    return absl::CancelledError(absl::StrCat("listing ", url_.ToString(), ": shutting down"));
  }
  const auto past_deadline = [this] {
    return absl::Now() > absl::FromUnixNanos(deadline_ns_.load());
  };
  const auto late = [&] {
    return absl::DeadlineExceededError(absl::StrCat(
        "listing ", url_.ToString(),
        by_stalls_.load() ? ": no page came for " : " took longer than ",
        absl::FormatDuration(limits_.max_time), " (--dataset-scan-timeout)"));
  };
  if (past_deadline()) return late();
  // A page in flight ends with the deadline, the daemon's stop or the
  // session's close (the access's cancellation).
  absl::StatusOr<ListPage> p = client_->List(
      access_, url_.bucket, prefix, delimiter, token, max_keys, [&] {
        return past_deadline() || (limits_.cancel != nullptr && limits_.cancel->load());
      });
  if (p.status().code() == absl::StatusCode::kCancelled) {
    if (past_deadline()) return late();
    return absl::CancelledError(
        absl::StrCat("listing ", url_.ToString(), ": the session or the daemon is stopping"));
  }
  if (!p.ok()) return p.status();
  if (p->truncated && p->next_token == token) {
    return absl::DataLossError(absl::StrCat("listing ", url_.ToString(),
                                            ": the store answered the same page again"));
  }
  if (by_stalls_.load() && (!p->objects.empty() || !p->prefixes.empty() || !p->truncated)) {
    // Progress: the wait for the next page starts now (never moved back).
    const int64_t until = absl::ToUnixNanos(absl::Now() + limits_.max_time);
    for (int64_t was = deadline_ns_.load();
         was < until && !deadline_ns_.compare_exchange_weak(was, until);) {
    }
  }
  const uint64_t n = counted ? p->objects.size() + p->prefixes.size() : 0;
  STOKER_RETURN_IF_ERROR(See(n));
  for (const std::string& q : p->prefixes) {
    if (!absl::StartsWith(q, prefix) || q.size() <= prefix.size()) {
      return absl::DataLossError(absl::StrCat("listing ", url_.ToString(),
                                              ": the store answered a prefix outside it"));
    }
  }
  for (const ListedObject& o : p->objects) {
    if (!absl::StartsWith(o.key, prefix) || o.etag.empty()) {
      return absl::DataLossError(absl::StrCat(
          "listing ", url_.ToString(), ": the store answered an object outside it or one "
          "without an ETag"));
    }
  }
  if (limits_.progress != nullptr && n > 0) limits_.progress->Listed(n);
  return p;
}

absl::Status Lister::Walk(const std::string& prefix, const std::string& delimiter,
                          const std::function<absl::Status(ListPage&)>& page) {
  std::string token;
  do {
    absl::StatusOr<ListPage> p = Page(prefix, delimiter, token, 0);
    if (!p.ok()) return p.status();
    if (absl::Status s = page(*p); !s.ok()) return s;
    token = p->truncated ? p->next_token : "";
  } while (!token.empty());
  return absl::OkStatus();
}

void RunOnThreads(int threads, const std::function<void()>& work) {
  std::vector<std::thread> started;
  started.reserve(threads > 1 ? threads - 1 : 0);
  for (int t = 1; t < threads; ++t) {
    try {
      started.emplace_back(work);
    } catch (const std::system_error&) {
      break;
    }
  }
  work();
  for (std::thread& t : started) t.join();
}

absl::Status ListFolders(Lister& lister, const std::vector<std::string>& folders,
                         const std::function<absl::Status(ListPage&)>& page) {
  absl::Mutex mu;
  std::vector<absl::Status> errors(folders.size());
  std::atomic<size_t> next{0};
  RunOnThreads(std::min<size_t>(16, folders.size()), [&] {
    for (size_t f; (f = next.fetch_add(1)) < folders.size();) {
      errors[f] = lister.Walk(folders[f], "/", [&](ListPage& p) {
        absl::MutexLock lock(&mu);
        return page(p);
      });
      if (!errors[f].ok()) next.store(folders.size());  // The first error ends it.
    }
  });
  for (const absl::Status& e : errors) {
    if (!e.ok()) return e;
  }
  return absl::OkStatus();
}

std::string FolderOf(const std::string& key) {
  const size_t slash = key.rfind('/');
  return slash == std::string::npos ? std::string() : key.substr(0, slash + 1);
}

FileVersion ObjectFileVersion(uint64_t size, const std::string& etag) {
  Checksum c;
  c.Update(etag.data(), etag.size());
  FileVersion v;
  v.size = size;
  v.mtime_ns = static_cast<int64_t>(c.value());
  return v;
}

}  // namespace stoker
