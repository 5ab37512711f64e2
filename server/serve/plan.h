// The deterministic order of samples for a session: which dataset indices
// form batch b of epoch e for one rank. Depends only on PlanSpec, so any
// daemon, thread count or restart reproduces it. Immutable; thread-safe.
//
// Semantics follow torch's DistributedSampler + DataLoader: the epoch's
// order is a permutation from (seed, epoch) when shuffling (identity
// otherwise). A dataset read in windows (shards: PlanSpec::
// first_epoch_windows) is shuffled within each window in turn in its first
// epoch (epoch 0), so that epoch reads its windows one after another; later
// epochs draw the whole permutation. Across ranks the order is padded by repeating its head until
// it divides evenly by world_size, or (drop_last) its tail is dropped; rank
// r takes positions r, r+W, r+2W, ... Its samples are then cut into batches
// of batch_size; the last partial batch is kept unless drop_last.
#ifndef STOKER_SERVER_SERVE_PLAN_H_
#define STOKER_SERVER_SERVE_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

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
};

// Appends the first epoch's order of window `w`, the samples [first, first
// + size): shuffled with the window's own stream (seed, 0, w) when
// spec.shuffle, else in index order. A windowed plan's RankOrder(0) is
// these, window after window, before ranks take their positions: what a
// session streaming its dataset's opening draws from the windows it has.
void AppendWindowOrder(const PlanSpec& spec, size_t w, uint64_t first, uint64_t size,
                       std::vector<uint64_t>* order);

class EpochPlan {
 public:
  // INVALID_ARGUMENT for batch_size 0 or rank >= world_size; INTERNAL for
  // windows that do not sum to num_samples (the dataset's own error);
  // FAILED_PRECONDITION when an epoch would hold no batch for this rank.
  static absl::StatusOr<EpochPlan> Create(const PlanSpec& spec);

  uint64_t samples_per_epoch() const { return per_rank_; }
  uint64_t batches_per_epoch() const { return batches_; }
  const PlanSpec& spec() const { return spec_; }

  // This rank's dataset indices for `epoch`, in delivery order, already cut
  // to samples_per_epoch() (and to whole batches under drop_last).
  std::vector<uint64_t> RankOrder(uint64_t epoch) const;

 private:
  explicit EpochPlan(const PlanSpec& spec);

  PlanSpec spec_;
  uint64_t per_rank_ = 0;  // Samples this rank sees per epoch (after cut).
  uint64_t batches_ = 0;
};

}  // namespace stoker

#endif  // STOKER_SERVER_SERVE_PLAN_H_
