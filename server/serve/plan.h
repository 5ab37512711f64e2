// The deterministic order of samples for a session: which dataset indices
// form batch b of epoch e for one rank. Depends only on PlanSpec (with the
// listed sizes it may carry), so any daemon, thread count or restart
// reproduces it. Immutable; thread-safe.
//
// Each epoch has one global order that no world size changes: the
// identity, or shuffled, CanonicalOrder's (seed, epoch, C) sequence. A
// dataset read in windows (shards, an ImageFolder in a bucket: PlanSpec::
// first_epoch_windows, more than one) is shuffled within each window in
// turn in its first epoch (epoch 0), so that epoch reads its windows one
// after another; later epochs draw the canonical order. One window is the
// canonical order (an ImageFolder in a bucket that fits its first window
// reads as the same folder on disk). The world reads that order in global steps of
// batch_size x world_size positions, rank r taking positions r, r+W,
// r+2W, ... of each, as torch's DistributedSampler + DataLoader: the tail is
// padded by repeating the order's head until it divides evenly by
// world_size, or (drop_last) dropped; the last partial batch is kept unless
// drop_last. An epoch may be read from a position `from` on: a run resumed
// at another world size continues the same global order where the run
// before it stopped.
#ifndef STOKER_SERVER_SERVE_PLAN_H_
#define STOKER_SERVER_SERVE_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/schema.h"
#include "server/serve/canonical_order.h"

namespace stoker {

struct PlanSpec {
  uint64_t num_samples = 0;
  uint32_t batch_size = 1;
  bool shuffle = false;
  uint64_t seed = 0;
  uint32_t rank = 0;
  uint32_t world_size = 1;
  bool drop_last = false;
  // Samples per window, consecutive in index order and summing to
  // num_samples (Dataset::first_epoch_windows); empty: one window.
  std::vector<uint64_t> first_epoch_windows;
  // The canonical partition count asked for (CanonicalOrder), and the
  // fraction of each partition read in another's place each epoch after
  // epoch 0: unset, the session's (the schema's defaults).
  uint32_t partitions = SessionDefaults().partitions();
  float exchange = SessionDefaults().exchange();
  // A first epoch over windows that are only a listing's
  // (Dataset::windows_for_listing_only) reads the canonical order instead.
  // EpochPlan does not read it: BatchOrder makes the plan without those
  // windows.
  bool canonical_first_epoch = false;
  // Each sample's bytes as its source listed them (ListedBytes; 0 where
  // not), that the exchange is weighed by, for a source that lists them
  // (SampleSource::lists_bytes); empty: by count. The order's key names
  // the rule, not the sizes.
  ExchangeSplits::SampleBytes listed_sizes;
};

// Appends the first epoch's order of window `w`, the samples [first, first
// + size): when spec.shuffle, the canonical first epoch of those samples
// alone (CanonicalOrder with the spec's partitions; epoch 0 exchanges
// nothing; window 0 with the run's seed, so a dataset that has only that
// window reads it as its canonical order, the others with a seed of their
// own), else in index order. A windowed plan's RankOrder(0) is these,
// window after window, before ranks take their positions: what a session
// streaming its dataset's opening draws from the windows it has.
void AppendWindowOrder(const PlanSpec& spec, size_t w, uint64_t first, uint64_t size,
                       std::vector<uint64_t>* order);

// What a run resumed from a saved position must share with the run that
// saved it: a stable hash of the partitions asked for, the exchange (and,
// shuffled from a source that lists sizes, `listed_sizes`, its rule:
// weighed by them), the seed, shuffle, drop_last and `pipeline`
// (Pipeline::order_fingerprint), but not the world size, rank or batch
// size. The dataset's listing (its names and sizes) is not in it: every
// node of a world, and a resumed run, must see the same listing.
uint64_t OrderKey(const PlanSpec& spec, const std::string& pipeline, bool listed_sizes);

class EpochPlan {
 public:
  // INVALID_ARGUMENT for batch_size 0 or rank >= world_size; INTERNAL for
  // windows that do not sum to num_samples (the dataset's own error);
  // FAILED_PRECONDITION when an epoch would hold no batch for this rank.
  static absl::StatusOr<EpochPlan> Create(const PlanSpec& spec);

  // This rank's samples and batches in an epoch read from global position
  // `from` on (0: the whole epoch; past its end: none).
  uint64_t samples_per_epoch(uint64_t from = 0) const;
  uint64_t batches_per_epoch(uint64_t from = 0) const;
  const PlanSpec& spec() const { return spec_; }
  // The canonical partition count in effect (1 without shuffling).
  uint32_t partitions() const;
  // The canonical order when shuffling; null without.
  const CanonicalOrder* canonical() const { return canonical_ ? &*canonical_ : nullptr; }

  // Whether `epoch` reads its windows in turn: its order is then
  // WindowedOrder(), which At and Batch take as `windowed`.
  bool Windowed(uint64_t epoch) const;
  std::vector<uint64_t> WindowedOrder() const;

  // The sample at `position` < num_samples of `epoch`'s global order: the
  // one every world size finds there. `windowed`, when given, is that
  // order (a windowed epoch's, or the one a streamed opening served).
  uint64_t At(uint64_t epoch, uint64_t position,
              const std::vector<uint64_t>* windowed = nullptr) const;
  // This rank's batch `b` of `epoch` read from `from`.
  std::vector<uint64_t> Batch(uint64_t epoch, uint64_t from, uint64_t b,
                              const std::vector<uint64_t>* windowed = nullptr) const;
  // All of this rank's samples of `epoch` from `from`, batch after batch.
  std::vector<uint64_t> RankOrder(uint64_t epoch, uint64_t from = 0) const;

 private:
  explicit EpochPlan(const PlanSpec& spec);

  PlanSpec spec_;
  std::optional<CanonicalOrder> canonical_;  // When shuffling.
};

}  // namespace stoker

#endif  // STOKER_SERVER_SERVE_PLAN_H_
