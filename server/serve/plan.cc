#include "server/serve/plan.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/cache_key.h"
#include "util/checksum.h"
#include "util/rng.h"

namespace stoker {

EpochPlan::EpochPlan(const PlanSpec& spec) : spec_(spec) {
  if (spec.shuffle) {
    canonical_.emplace(spec.num_samples, spec.seed, spec.partitions, spec.exchange,
                       spec.listed_sizes);
  }
}

uint64_t EpochPlan::samples_per_epoch(uint64_t from) const {
  const uint64_t n = spec_.num_samples, w = spec_.world_size;
  const uint64_t left = from < n ? n - from : 0;
  const uint64_t rank_samples = spec_.drop_last ? left / w : (left + w - 1) / w;
  return spec_.drop_last ? rank_samples / spec_.batch_size * spec_.batch_size : rank_samples;
}

uint64_t EpochPlan::batches_per_epoch(uint64_t from) const {
  const uint64_t b = spec_.batch_size;
  return (samples_per_epoch(from) + b - 1) / b;
}

uint32_t EpochPlan::partitions() const {
  return canonical_.has_value() ? canonical_->partitions() : 1;
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
  if (plan.batches_per_epoch() == 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%d samples over %d ranks give rank %d no %sbatch of %d",
        spec.num_samples, spec.world_size, spec.rank,
        spec.drop_last ? "complete " : "", spec.batch_size));
  }
  return plan;
}

void AppendWindowOrder(const PlanSpec& spec, size_t w, uint64_t first, uint64_t size,
                       std::vector<uint64_t>* order) {
  if (!spec.shuffle) {
    for (uint64_t i = 0; i < size; ++i) order->push_back(first + i);
    return;
  }
  // Window 0 with the run's own seed: a dataset that ends with that one
  // window reads it as its canonical first epoch, streamed or not.
  const uint64_t seed =
      w == 0 ? spec.seed : MixSeed({spec.seed, 0x57494e444f57ULL /* "WINDOW" */, w});
  const CanonicalOrder window(size, seed, spec.partitions, 0);  // Epoch 0: no exchange.
  for (uint64_t i = 0; i < size; ++i) order->push_back(first + window.At(0, i));
}

uint64_t OrderKey(const PlanSpec& spec, const std::string& pipeline, bool listed_sizes) {
  const float q = spec.exchange == 0 ? 0.0f : spec.exchange;  // -0 is 0.
  uint32_t exchange;
  std::memcpy(&exchange, &q, sizeof exchange);
  const uint32_t partitions = spec.partitions;  // As asked (the order's C may be fewer).
  // An exchange is weighed by the samples' listed bytes where their source
  // lists them (exchange_split.h): that rule is part of the key, so a
  // position saved under the rule by count is refused, not read in
  // another order (other keys are those of the releases before it).
  std::string key = CacheKey({"order", uint64_t{partitions}, uint64_t{exchange}, spec.seed,
                              uint64_t{spec.shuffle}, uint64_t{spec.drop_last}, pipeline});
  if (spec.shuffle && q != 0 && listed_sizes) key += CacheKey({"listed-bytes"});
  Checksum sum;
  sum.Update(key.data(), key.size());
  return sum.state();
}

bool EpochPlan::Windowed(uint64_t epoch) const {
  return spec_.shuffle && epoch == 0 && spec_.first_epoch_windows.size() > 1;
}

std::vector<uint64_t> EpochPlan::WindowedOrder() const {
  std::vector<uint64_t> order;
  order.reserve(spec_.num_samples);
  uint64_t first = 0;
  for (size_t w = 0; w < spec_.first_epoch_windows.size(); ++w) {
    AppendWindowOrder(spec_, w, first, spec_.first_epoch_windows[w], &order);
    first += spec_.first_epoch_windows[w];
  }
  return order;
}

uint64_t EpochPlan::At(uint64_t epoch, uint64_t position,
                       const std::vector<uint64_t>* windowed) const {
  if (windowed != nullptr) return (*windowed)[position];
  if (!spec_.shuffle) return position;
  return canonical_->At(epoch, position);
}

std::vector<uint64_t> EpochPlan::Batch(uint64_t epoch, uint64_t from, uint64_t b,
                                       const std::vector<uint64_t>* windowed) const {
  const uint64_t size = spec_.batch_size, per_rank = samples_per_epoch(from);
  std::vector<uint64_t> out;
  for (uint64_t j = b * size; j < per_rank && j < (b + 1) * size; ++j) {
    // Position in the padded order; padding repeats the order's head.
    const uint64_t pos = from + j * spec_.world_size + spec_.rank;
    out.push_back(At(epoch, pos % spec_.num_samples, windowed));
  }
  return out;
}

std::vector<uint64_t> EpochPlan::RankOrder(uint64_t epoch, uint64_t from) const {
  const std::vector<uint64_t> windowed = Windowed(epoch) ? WindowedOrder()
                                                         : std::vector<uint64_t>();
  std::vector<uint64_t> mine;
  for (uint64_t b = 0; b < batches_per_epoch(from); ++b) {
    for (uint64_t i : Batch(epoch, from, b, Windowed(epoch) ? &windowed : nullptr)) {
      mine.push_back(i);
    }
  }
  return mine;
}

}  // namespace stoker
