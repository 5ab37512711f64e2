// Reading an object-store shard to index it (s3_shards.h): ranged GETs
// of kShardBlockBytes at the listed version (If-Match), forward through
// the shard, every header and member checked as tar_index.h checks a local
// file (the listed size is the file's), WebDataset's rules grouping the
// members into samples (webdataset.h); each sample's first picture, its
// mask and its kept members (ShardIndexing::kept_members) handed to
// ReadAhead::keep as they stream by (up to kMostReadAhead and the file cap
// each, ReadAhead::most_bytes in all).
// What several shards' indexing at once shares is ShardIndexing; the
// indexes' memory is charged to the caller as it grows.
//
// Thread-safety: one ShardIndexing serves any number of IndexShard calls
// at once; each call is one thread's.
#ifndef STOKER_SERVER_SOURCES_OBJECTS_S3_SHARD_INDEX_H_
#define STOKER_SERVER_SOURCES_OBJECTS_S3_SHARD_INDEX_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "proto/kept.pb.h"
#include "server/dataset/dataset.h"
#include "server/dataset/opening_progress.h"
#include "server/objstore/object_store.h"
#include "server/sources/objects/s3_lister.h"
#include "server/sources/objects/s3_shard_list.h"
#include "server/sources/source.h"

namespace stoker {

// One ranged GET of a shard being indexed.
inline constexpr uint64_t kShardBlockBytes = uint64_t{8} << 20;
// The largest picture or mask read ahead as it streams by.
inline constexpr uint64_t kMostReadAhead = uint64_t{16} << 20;

// What opening shares across the shards it indexes at once.
struct ShardIndexing {
  const S3Url& root;
  const ObjectStoreAccess& access;
  ObjectStore* client;
  const ScanLimits& limits;
  const ReadAhead& ahead;
  const std::vector<std::string>& kept_members;  // Each sample's (S3Source.members).
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

// A pattern's first shard's first block, asked for beside the listing by a
// streamed opening (the session's first batch needs it): taken only where
// the listing names the version it read, so the first batch comes a round
// trip sooner.
struct FirstBlock {
  std::string key;  // "": none asked for.
  std::string block;
  ObjectVersion seen;
  bool read = false;

  bool Fits(const ListedShard& shard) const {
    return read && shard.key == key && IsListedVersion(seen, shard.size, shard.etag) &&
           block.size() == std::min(kShardBlockBytes, shard.size);
  }
};

// The memory an index of `samples` samples, each with `kept_members`
// members, is charged for.
uint64_t ShardIndexBytes(uint64_t samples, size_t kept_members);

// Reads `shard` whole (but for blocks only members no sample takes span)
// and indexes it; `first_block` (may be null): its first block, read
// already at the listed version.
absl::StatusOr<kept::ShardIndex> IndexShard(ShardIndexing& ix, const ListedShard& shard,
                                            std::string* first_block = nullptr);

// Whether a kept index fits `shard` (this daemon wrote it: a check, not
// a trust boundary): every member inside the shard, `members` kept members
// per sample.
bool KeptIndexFits(const kept::ShardIndex& index, const ListedShard& shard, size_t members);

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_OBJECTS_S3_SHARD_INDEX_H_
