// The `webdataset` source (proto WebDatasetSource): samples as groups of
// members of tar shards, WebDataset's format (server/sources/source.h).
// The shards: a .tar file, a folder's .tar files, a brace pattern's names,
// or the names a file lists (read as the caller, as a manifest is: a .tar
// name per line, relative to the file's folder, in its order).
//
// Each shard is opened through the caller's confinement (the caller's own
// open, as any file of a dataset) and indexed from its headers
// (tar_index.h): nothing of a member is read to list it but a .cls label.
// A sample's files are its members, named "<shard>#<n>" (n numbers the
// dataset's members); each read opens the shard again as the caller and
// reads the member's bytes at its offset, checked against the shard as it
// was indexed: a shard rewritten since is that sample's DATA_LOSS, never
// another member's bytes. Cache entries are keyed by the shard (device,
// inode), the member's offset and size, at the shard's version.
//
// A shard that lies (tar_index.h), is not a regular file (a FIFO), lies
// outside the caller's folder, or holds a label that is not an integer
// fails the dataset's opening with that shard named; caps: members and
// samples against --max-dataset-files, a member's size against the file
// cap, the sample list against the caller's memory.
#ifndef STOKER_SERVER_SOURCES_SHARDS_WEBDATASET_H_
#define STOKER_SERVER_SOURCES_SHARDS_WEBDATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/dataset/dataset.h"

namespace stoker {

// The names a pattern with {first..last} ranges stands for, in order (the
// leftmost range varies slowest; a number keeps the first bound's width,
// zero-padded), made one at a time: a pattern naming millions of shards
// costs nothing until they are opened (and the first missing one ends
// that). A pattern without braces is itself.
class ShardPattern {
 public:
  static constexpr size_t kMaxBytes = 4096;
  static constexpr size_t kMaxRanges = 8;
  // INVALID_ARGUMENT for a brace not closed or not opened, a range not of
  // two decimal numbers in order, more than kMaxRanges ranges or kMaxBytes
  // bytes, or more than `max` names.
  static absl::StatusOr<ShardPattern> Parse(const std::string& pattern, uint64_t max);
  uint64_t size() const { return size_; }
  std::string Name(uint64_t i) const;

 private:
  struct Range {
    uint64_t first = 0, count = 0;
    size_t width = 0;
  };
  std::vector<std::string> text_;  // The literal pieces around the ranges.
  std::vector<Range> ranges_;
  uint64_t size_ = 1;
};

// Consecutive shards read together: the windows of the first epoch's
// order (Dataset::first_epoch_windows) of kShardsPerWindow shards, or, for
// shards in an object store, of 1, 2, 4 and 8 shards first: small first
// windows let a streamed opening begin serving once its first shards are
// indexed (a shuffle buffer that fills as it is drawn from, as
// WebDataset's `initial`).
inline constexpr size_t kShardsPerWindow = 16;

// The window shard `shard` (its index in the dataset's order) is in: with
// `growing`, windows of 1, 2, 4 and 8 shards, then kShardsPerWindow (a
// dataset in an object store, whose opening may be streamed); else
// kShardsPerWindow each (local shards).
size_t WindowOfShard(size_t shard, bool growing);

// FAILED_PRECONDITION: "<what> holds no samples with ...".
absl::Status NoSamplesError(const std::string& what);

// Makes the samples of shards one dataset: FAILED_PRECONDITION ("<what>
// holds no samples with ...") without any; a mask (file 1) only when
// every sample has one (`masks`), else none is kept; then the `kept`
// members' files, each sample's `more` holding [mask,] kept...
// (Dataset::member_files names them); the labels' class count; the first
// epoch's windows (WindowOfShard) from `per_shard` (each shard's sample
// count, in index order).
absl::Status FinishShardDataset(const std::string& what, const std::vector<uint64_t>& per_shard,
                                bool masks, const std::vector<std::string>& kept, Dataset* ds,
                                bool growing_windows = false);

// What each of a shard dataset's files holds (Dataset::member_files): ""
// for the picture, "seg.png" with `masks`, then the `kept` members.
std::vector<std::string> ShardMemberFiles(bool masks, const std::vector<std::string>& kept);

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_SHARDS_WEBDATASET_H_
