// A shard dataset's samples, made from its shards' indexes (kept::
// ShardIndex) as they are done, in any order: each shard's samples go in
// the dataset's order (shard by shard), a window of the first epoch
// (WindowOfShard) at a time, into a DatasetGrowth, each window published
// once its shards are all in. Sample names come from `name` (a member's
// shard, offset, size and, for a kept member, its extension); each
// sample's files are its picture, its mask and the `kept` members (an
// absent one named at offset and size 0). The list is charged to the
// caller (ScanLimits::charge_list); the caller bounds the shards' tar
// members by max_files (kept::ShardIndex.members), as the local kind does.
//
// Masks are decided by the first window with samples (a streamed opening's
// sessions read the windows as they come, and one not streamed gives the
// same dataset): kept when each of its samples has one, and a later sample
// without one gets an empty mask name (a read error for sessions that
// read masks). Not streamed (ScanLimits::streamed), Finish moves the
// samples into the dataset's plain list (FinishShardDataset).
//
// Thread-safe: Add from any thread; Finish once, after every Add.
#ifndef STOKER_SERVER_SOURCES_SHARDS_SHARD_ASSEMBLY_H_
#define STOKER_SERVER_SOURCES_SHARDS_SHARD_ASSEMBLY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "proto/kept.pb.h"
#include "server/dataset/dataset.h"
#include "server/dataset/dataset_growth.h"

namespace stoker {

class ShardAssembly {
 public:
  using Name = std::function<std::string(uint32_t shard, uint64_t offset, uint64_t size,
                                         const std::string& kept)>;
  // `growth`: room for every sample (ShardCapacity), the windows of `shards`.
  ShardAssembly(size_t shards, Name name, std::vector<std::string> kept,
                const ScanLimits& limits, DatasetGrowth* growth);

  // Shard `i`'s index: appended with the shards after it that are done
  // already, once every shard before it is in. RESOURCE_EXHAUSTED past the
  // caller's memory (then every later Add returns it too).
  absl::Status Add(size_t i, kept::ShardIndex index);

  // The end, with the opening's `status`. Streamed: the growth ends (OK:
  // its class count), and its charges are held by it. Else, with OK, the
  // samples move into ds->samples, FinishShardDataset (`what` names the
  // dataset) decides masks, classes and windows, and ds holds the charges.
  absl::Status Finish(absl::Status status, const std::string& what, Dataset* ds);

  // Whether the first window's samples all have masks (streamed).
  bool masks() const;
  // What each of a sample's files holds (Dataset::member_files; streamed).
  std::vector<std::string> member_files() const;
  uint64_t skipped() const;

 private:
  absl::Status AppendWindow() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t shards_;
  const Name name_;
  const std::vector<std::string> kept_;
  const ScanLimits& limits_;
  const bool streamed_;
  DatasetGrowth* const growth_;
  mutable absl::Mutex mu_;
  std::map<size_t, kept::ShardIndex> done_ ABSL_GUARDED_BY(mu_);  // Not yet in.
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;  // The next shard to go in.
  std::vector<Sample> window_ ABSL_GUARDED_BY(mu_);  // The open window's.
  std::vector<uint64_t> per_shard_ ABSL_GUARDED_BY(mu_);
  ListCharge charge_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  uint64_t skipped_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t max_label_ ABSL_GUARDED_BY(mu_) = -1;
  bool all_masked_ ABSL_GUARDED_BY(mu_) = true;
  bool masks_ ABSL_GUARDED_BY(mu_) = false;  // Decided by the first window
  bool decided_ ABSL_GUARDED_BY(mu_) = false;  // with samples.
};

// The most samples `shard_bytes` of tar can hold: each has a member, whose
// header alone takes 512 bytes; at most `max_files`.
uint64_t ShardCapacity(const std::vector<uint64_t>& shard_bytes, uint64_t max_files);

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_SHARDS_SHARD_ASSEMBLY_H_
