// A dataset's sample list: paths and integer labels, and the source they are
// read from, opened once when a session opens by its source kind
// (server/sources). Immutable after that, so one Dataset may be shared
// read-only by any number of threads and sessions; but a streamed opening's
// samples (`growth`) keep coming, window by window, after sessions begin.
//
// One interface for both: its readers (sessions, their batch order, the
// daemon, the cache warmer) go through the methods (sample_count, sample,
// streamed, Listed, WaitListed, FirstEpochWindowAround, OpeningReads),
// which answer for a whole dataset as for a growing one; `samples` and
// `growth` are the opening kind's to fill.
#ifndef STOKER_SERVER_DATASET_DATASET_H_
#define STOKER_SERVER_DATASET_DATASET_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/access/file_system.h"
#include "server/dataset/opening_progress.h"
#include "util/cancellation.h"

namespace stoker {

class SampleSource;   // server/dataset/sample_source.h
class DatasetGrowth;  // server/dataset/dataset_growth.h

// Most files one sample may have (a manifest line's paths).
inline constexpr size_t kMaxFilesPerSample = 8;

// Charges `bytes` of RAM to the caller: a token that gives them back when
// the last holder drops it, or null when there is no room. The daemon's is
// MemoryBudget::Charge for the session's uid.
using ChargeRam = std::function<std::shared_ptr<void>(uint64_t bytes)>;

struct Sample {
  std::string path;  // File path, or the key in an LMDB dataset.
  int32_t label;
  std::vector<std::string> more;  // A manifest's further files (a mask...).
  // File `k` of the sample (0: path).
  const std::string& file(size_t k) const { return k == 0 ? path : more[k - 1]; }
};

// What is listed of a dataset: the windows of the first epoch's order
// published so far (Dataset::first_epoch_windows; a whole dataset's are all
// there), whether the listing has ended, and its status and class count
// once it has.
struct Listing {
  std::vector<uint64_t> windows;
  bool done = false;
  absl::Status status;
  uint32_t num_classes = 0;
};

struct Dataset {
  std::string description;  // "folder:/data/train", for logs and stats.
  std::vector<Sample> samples;
  std::vector<std::string> class_names;  // FOLDER: index = label.
  uint32_t num_classes = 0;
  uint64_t skipped_files = 0;  // Non-image files seen while scanning.
  uint32_t files_per_sample = 1;
  // Shards: the member extension each of a sample's files holds, by file
  // index ("" for the picture, then "seg.png" and the kept members); empty
  // for other kinds (Pipeline::BindFiles resolves FieldSpec.member here).
  std::vector<std::string> member_files;
  // Samples per window of the first epoch's order (PlanSpec), consecutive
  // in index order: a shard dataset's groups of shards, each read whole,
  // whose samples that epoch shuffles one window after another. Empty: one
  // window.
  std::vector<uint64_t> first_epoch_windows;
  // The windows only let a session begin before the listing ends (an
  // ImageFolder in a bucket); its reads are per sample, not per window. A
  // session may wait for the whole listing and read the canonical first
  // epoch instead (PlanSpec::canonical_first_epoch).
  bool windows_for_listing_only = false;
  // Where samples are read, set by the source kind that opened the dataset
  // (server/sources): files through the caller's confinement, an LMDB
  // environment, or typed arrays (source->arrays(); sample.path is then the
  // sample's name, e.g. "file.npy[7]").
  std::shared_ptr<const SampleSource> source;
  // Remote requests and bytes the opening made for the samples' bytes (a
  // shard read whole to index it, its members kept ahead): the first
  // epoch's reads, counted as the session's.
  uint64_t read_ahead_requests = 0, read_ahead_bytes = 0;
  // The RAM its sample list is charged for (ListCharge), held as long as
  // the list is.
  std::vector<std::shared_ptr<void>> list_charge;
  // A streamed opening: the samples, still growing (`samples` is empty,
  // first_epoch_windows and num_classes are only the growth's at its end).
  std::shared_ptr<DatasetGrowth> growth;
  // Raised as the session reading it closes: its source's object store
  // reads in flight end CANCELLED, and later ones are refused, so none
  // holds a reader thread for a session that is gone. Null: none to raise.
  std::shared_ptr<Cancellation> reads_cancel;

  // The samples there are now (all, or those a streamed opening published).
  uint64_t sample_count() const;
  // Sample i < sample_count() (per sample on the hot path: inline).
  const Sample& sample(uint64_t i) const {
    return growth == nullptr ? samples[i] : GrowingSample(i);
  }
  // The size to plan caches for: sample_count(), or the streamed opening's
  // guess of its end.
  uint64_t expected_samples() const;
  // Whether samples keep coming after sessions begin (a streamed opening,
  // ended or not): its sizes are not known when a session opens.
  bool streamed() const { return growth != nullptr; }
  // What is listed now; a whole dataset's listing is done, its windows
  // first_epoch_windows.
  Listing Listed() const;
  // Listed(), once more than `known` windows are listed or the listing has
  // ended, or after `timeout`.
  Listing WaitListed(size_t known, absl::Duration timeout) const;
  // The listed window of the first epoch's order holding sample `i`: its
  // first sample and size ({i, 1} past them all).
  std::pair<uint64_t, uint64_t> FirstEpochWindowAround(uint64_t i) const;
  // The remote requests and bytes the opening made: the first epoch's
  // reads (a streamed opening's whole indexing, once it ended).
  std::pair<uint64_t, uint64_t> OpeningReads() const;

 private:
  const Sample& GrowingSample(uint64_t i) const;
};

// Bounds on a folder scan (a folder may be huge, slow, or loop through
// symlinks).
struct ScanLimits {
  uint64_t max_files = 20'000'000;  // Directory entries seen in all.
  // A scan's or listing's whole time; for shards read whole to index them
  // (s3_shards.h), the longest wait for their next bytes.
  absl::Duration max_time = absl::Minutes(10);
  const std::atomic<bool>* cancel = nullptr;  // True: stop (shutdown).
  // Manifests and LMDB data files are opened through the file environment,
  // beneath `within` when set (a confined caller's folder), and a manifest
  // is capped at `max_file_bytes`, `max_files` lines and `max_line_bytes`
  // per line.
  FileSystem* fs = nullptr;  // nullptr: FileSystem::Default().
  const Beneath* within = nullptr;
  uint64_t max_file_bytes = kDefaultMaxFileBytes;
  uint64_t max_line_bytes = 64 * 1024;
  // How long a file the caller's own open proved is served from the caches
  // without another open (server/dataset/proofs.h); zero: every read opens.
  absl::Duration proof_lifetime = absl::Minutes(10);
  // The caller's budget for sample lists (paths and names as the dataset
  // keeps them); null: not charged.
  ChargeRam charge_list;
  // Where the opening counts what it has listed and read, for its caller
  // to see; null: nowhere. `progress_owner` (may be null) keeps it for an
  // opening that outlives the call (a streamed one holds a copy).
  OpeningProgress* progress = nullptr;
  std::shared_ptr<void> progress_owner;
  // The session takes a streamed opening (SessionSpec.streamed_opening): a
  // kind whose indexing is long may return once its first window is
  // indexed, the rest to come in Dataset::growth (`progress` is then
  // counted until the indexing ends).
  bool streamed = false;
  // A folder in an object store of at most about this many objects is
  // listed flat, page after page, rather than class by class (0: always by
  // class; s3_folder.h); `flat_page_keys`: those pages' size (0: the
  // store's own).
  uint64_t flat_listing_objects = 4000;
  int flat_page_keys = 0;
  // Runs the part of an opening that outlives it (a streamed opening's
  // indexing) on a thread the daemon joins when it stops (false: it is
  // stopping, not run); null: a thread of the opening's own, which
  // dropping the dataset waits for.
  std::function<bool(std::function<void()>)> background;
};

// A sample list's memory, charged to limits.charge_list as the list grows
// (in steps of 16 MiB, so a 20-million-line manifest under a long root is
// refused when its paths pass the caller's budget, not after they were
// built). Not thread-safe: one scan.
class ListCharge {
 public:
  explicit ListCharge(const ScanLimits& limits) : charge_(limits.charge_list) {}
  // Charges `s` (its strings and its own size); RESOURCE_EXHAUSTED naming
  // the budget once it has no room.
  absl::Status Add(const Sample& s);
  // Charges what is left and moves every token into ds->list_charge; the
  // same error.
  absl::Status Finish(Dataset* ds);

 private:
  static constexpr uint64_t kStep = uint64_t{16} << 20;
  absl::Status Charge();
  ChargeRam charge_;
  uint64_t pending_ = 0, charged_ = 0;
  std::vector<std::shared_ptr<void>> tokens_;
};

// Calls fn(relative paths, label) for each `path[<TAB>path...]<TAB>label`
// line of the manifest at `manifest` (stopping at, and returning, the first
// error fn returns), read through limits.fs beneath
// limits.within (every line with the same number of paths, at most
// `max_files`). '#' comments and blank lines are skipped. With
// `label_optional`, a line whose last column is not a number is all paths,
// its label 0.
// FAILED_PRECONDITION with the line number for a malformed line (never its
// content: the daemon may read files the caller cannot); RESOURCE_EXHAUSTED
// past the limits; the file environment's errors for the manifest itself.
absl::Status ParseManifest(const std::string& manifest, const ScanLimits& limits,
                           size_t max_files,
                           const std::function<absl::Status(std::vector<std::string>, int32_t)>& fn,
                           bool label_optional = false);

// ParseManifest over a manifest's `text` read elsewhere (an object),
// `manifest` naming it in errors; the same lines, limits and errors.
absl::Status ParseManifestText(
    const std::string& manifest, absl::string_view text, const ScanLimits& limits,
    size_t max_files, const std::function<absl::Status(std::vector<std::string>, int32_t)>& fn,
    bool label_optional = false);

// Max label + 1 (0 for no samples).
uint32_t NumClasses(const std::vector<Sample>& samples);

// The window of `windows` (sizes of consecutive windows from sample 0;
// Dataset::first_epoch_windows) holding sample `i`: its first sample and
// size; {i, 1} past them all.
std::pair<uint64_t, uint64_t> WindowAround(const std::vector<uint64_t>& windows, uint64_t i);

}  // namespace stoker

#endif  // STOKER_SERVER_DATASET_DATASET_H_
