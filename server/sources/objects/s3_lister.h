// What the object store kinds (s3_folder.h's ImageFolder, s3_shards.h's
// WebDataset shards) share: the listing's walk, the version an object's
// cache entries record, and their sources' common part.
//
// Lister walks the pages of a prefix as the caller (its access and
// owner), checked page by page: cancellation, the scan deadline
// (--dataset-scan-timeout: the whole listing's time, or each page's
// wait after BoundByStalls), the objects seen against max_files
// (--max-dataset-files), and what the store answered (a prefix or object
// outside the one asked for, or an object without an ETag, is DATA_LOSS).
// Errors name the URL. Thread-safe: one Lister may walk several prefixes
// at once, its count shared.
#ifndef STOKER_SERVER_SOURCES_OBJECTS_S3_LISTER_H_
#define STOKER_SERVER_SOURCES_OBJECTS_S3_LISTER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/access/file_system.h"
#include "server/dataset/dataset.h"
#include "server/dataset/sample_source.h"
#include "server/objstore/object_store.h"
#include "server/sources/source.h"

namespace stoker {

class Lister {
 public:
  // All of them outlive the Lister.
  Lister(const S3Url& url, const ObjectStoreAccess& access, ObjectStore* client,
         const ScanLimits& limits);
  // One that goes on where `before` (of the same listing) is: its objects
  // seen so far count against the limit, and its deadline holds.
  Lister(const S3Url& url, const ObjectStoreAccess& access, ObjectStore* client,
         const ScanLimits& limits, const Lister& before);

  // Every page of `prefix` (with `delimiter`), each handed to `page`; its
  // error ends the walk.
  absl::Status Walk(const std::string& prefix, const std::string& delimiter,
                    const std::function<absl::Status(ListPage&)>& page);
  // From now on the scan timeout bounds the wait for each page, not the
  // whole listing (one that goes on while its first part is served).
  void BoundByStalls();
  // One page of `prefix` from `token` ("": the first), at most `max_keys`
  // (0: the store's own page size), checked as Walk checks each; a
  // truncated page comes with its next token. Not `counted`: its objects
  // are not counted as seen (the caller counts what it takes of them).
  absl::StatusOr<ListPage> Page(const std::string& prefix, const std::string& delimiter,
                                const std::string& token, int max_keys, bool counted = true);
  // Counts `n` more objects seen (against max_files, and as progress);
  // RESOURCE_EXHAUSTED past max_files, as TooMany.
  absl::Status Count(uint64_t n);
  absl::Status TooMany() const;

 private:
  // Counts `n` more objects seen against max_files (TooMany past it).
  absl::Status See(uint64_t n);

  const S3Url& url_;
  const ObjectStoreAccess& access_;
  ObjectStore* const client_;
  const ScanLimits& limits_;
  std::atomic<int64_t> deadline_ns_;  // Unix ns.
  std::atomic<bool> by_stalls_{false};
  std::atomic<uint64_t> seen_{0};
};

// Walks each of `folders` (prefixes ending in '/', or "" for the top)
// delimited, at most 16 at a time, handing every page to `page` under a
// lock of its own (so `page` need not be thread-safe); after the first
// error no other folder's walk begins, and it is returned.
absl::Status ListFolders(Lister& lister, const std::vector<std::string>& folders,
                         const std::function<absl::Status(ListPage&)>& page);

// The folder `key` lies in, with its '/' ("" for the bucket's top).
std::string FolderOf(const std::string& key);

// Runs `work` on up to `threads` threads, this one among them, and returns
// once each has returned. A thread the process cannot start is done
// without: `work` drains a shared queue, so fewer threads only take longer
// (and a daemon out of threads is not ended by one user's opening).
void RunOnThreads(int threads, const std::function<void()>& work);

// Whether the store answered with the listed version of an object: its
// size, and its ETag where the answer has one (a store that ignored
// If-Match must not have another version's bytes taken for this one).
inline bool IsListedVersion(const ObjectVersion& seen, uint64_t size, const std::string& etag) {
  return seen.size == size && (seen.etag.empty() || seen.etag == etag);
}

// The version an object's L2 entries record: its size and a digest of its
// ETag that is the same in every build and process (L2 outlives the
// daemon).
FileVersion ObjectFileVersion(uint64_t size, const std::string& etag);

// Where a listing is kept across sessions (SourceContext::kept; null:
// nowhere; charged to the access's owner), and whether to list again
// regardless.
struct KeptListing {
  KeptValues* values = nullptr;
  bool refresh = false;
};

// The samples of objects in a store: versioned (by size and ETag), and
// remote (their reads are counted as the store's).
class ObjectStoreSource : public SampleSource {
 public:
  bool Versioned() const override { return true; }
  bool remote() const override { return true; }
};

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_OBJECTS_S3_LISTER_H_
