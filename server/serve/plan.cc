#include "server/serve/plan.h"

#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/rng.h"

namespace stoker {

EpochPlan::EpochPlan(const PlanSpec& spec) : spec_(spec) {
  const uint64_t n = spec.num_samples, w = spec.world_size;
  const uint64_t rank_samples = spec.drop_last ? n / w : (n + w - 1) / w;
  batches_ = spec.drop_last ? rank_samples / spec.batch_size
                            : (rank_samples + spec.batch_size - 1) / spec.batch_size;
  per_rank_ = spec.drop_last ? batches_ * spec.batch_size : rank_samples;
}

absl::StatusOr<EpochPlan> EpochPlan::Create(const PlanSpec& spec) {
  if (spec.batch_size == 0) {
    return absl::InvalidArgumentError("batch_size must be at least 1");
  }
  if (spec.world_size == 0 || spec.rank >= spec.world_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d must be less than world_size %d", spec.rank, spec.world_size));
  }
  uint64_t windowed = 0;
  for (uint64_t w : spec.first_epoch_windows) windowed += w;
  if (!spec.first_epoch_windows.empty() && windowed != spec.num_samples) {
    return absl::InternalError(absl::StrCat("the dataset's windows hold ", windowed,
                                            " samples of its ", spec.num_samples));
  }
  EpochPlan plan(spec);
  if (plan.batches_ == 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%d samples over %d ranks give rank %d no %sbatch of %d",
        spec.num_samples, spec.world_size, spec.rank,
        spec.drop_last ? "complete " : "", spec.batch_size));
  }
  return plan;
}

namespace {

// Shuffles order[first, first + size) with `rng`.
void Shuffle(uint64_t first, uint64_t size, Rng rng, std::vector<uint64_t>* order) {
  for (uint64_t i = size; i > 1; --i) {
    std::swap((*order)[first + i - 1], (*order)[first + rng.Below(i)]);
  }
}

}  // namespace

void AppendWindowOrder(const PlanSpec& spec, size_t w, uint64_t first, uint64_t size,
                       std::vector<uint64_t>* order) {
  const uint64_t at = order->size();
  for (uint64_t i = 0; i < size; ++i) order->push_back(first + i);
  if (spec.shuffle) {
    Shuffle(at, size, Rng(MixSeed({spec.seed, 0, 0x57494e444f57ULL /* "WINDOW" */, w})), order);
  }
}

std::vector<uint64_t> EpochPlan::RankOrder(uint64_t epoch) const {
  const uint64_t n = spec_.num_samples;
  std::vector<uint64_t> order;
  if (spec_.shuffle && epoch == 0 && spec_.first_epoch_windows.size() > 1) {
    order.reserve(n);
    uint64_t first = 0;
    for (size_t w = 0; w < spec_.first_epoch_windows.size(); ++w) {
      AppendWindowOrder(spec_, w, first, spec_.first_epoch_windows[w], &order);
      first += spec_.first_epoch_windows[w];
    }
  } else {
    order.resize(n);
    std::iota(order.begin(), order.end(), uint64_t{0});
    if (spec_.shuffle) {
      Shuffle(0, n, Rng(MixSeed({spec_.seed, epoch, 0x5348554646ULL /* "SHUFF" */})), &order);
    }
  }
  std::vector<uint64_t> mine;
  mine.reserve(per_rank_);
  for (uint64_t k = 0; k < per_rank_; ++k) {
    // Position in the padded order; padding repeats the order's head.
    const uint64_t pos = k * spec_.world_size + spec_.rank;
    mine.push_back(order[pos % n]);
  }
  return mine;
}

}  // namespace stoker
