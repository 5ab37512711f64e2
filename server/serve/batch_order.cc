#include "server/serve/batch_order.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/dataset/sample_source.h"
#include "util/status_macros.h"

namespace stoker {
namespace {

// How often a wait for the next window looks at `stop`.
constexpr absl::Duration kPoll = absl::Milliseconds(50);

}  // namespace

BatchOrder::BatchOrder(PlanSpec spec, std::shared_ptr<const Dataset> ds)
    : asked_(spec),
      spec_(std::move(spec)),
      ds_(std::move(ds)),
      whole_listing_(spec_.shuffle && spec_.canonical_first_epoch &&
                     ds_->windows_for_listing_only) {}

absl::StatusOr<std::unique_ptr<BatchOrder>> BatchOrder::Create(
    PlanSpec spec, std::shared_ptr<const Dataset> ds, Start start) {
  std::unique_ptr<BatchOrder> o(new BatchOrder(std::move(spec), std::move(ds)));
  o->epoch_ = start.epoch;
  o->from_ = start.from;
  o->batch_ = start.batch;
  if (!o->ds_->streamed()) {
    STOKER_RETURN_IF_ERROR(o->MakePlan(
        o->ds_->sample_count(),
        o->whole_listing_ ? std::vector<uint64_t>() : o->ds_->first_epoch_windows));
    o->Settle();
    if (o->plan_->Windowed(o->epoch_)) o->windowed_ = o->plan_->WindowedOrder();
    return o;
  }
  if (start.epoch != 0) {
    return absl::InternalError("a streamed opening serves from the first epoch only");
  }
  // The spec's own errors now, as for any dataset.
  PlanSpec check = o->spec_;
  check.num_samples = uint64_t{1} << 62;
  check.first_epoch_windows.clear();
  STOKER_RETURN_IF_ERROR(EpochPlan::Create(check).status());
  return o;
}

absl::Status BatchOrder::MakePlan(uint64_t samples, std::vector<uint64_t> windows) {
  spec_.num_samples = samples;
  if (ListsBytes(*ds_)) spec_.listed_sizes = [ds = ds_](uint64_t i) { return ListedBytes(*ds, i); };
  spec_.first_epoch_windows = std::move(windows);
  STOKER_ASSIGN_OR_RETURN(EpochPlan plan, EpochPlan::Create(spec_));
  plan_.emplace(std::move(plan));
  per_rank_.store(plan_->samples_per_epoch(), std::memory_order_release);
  partitions_.store(plan_->partitions(), std::memory_order_release);
  per_epoch_.store(plan_->batches_per_epoch(), std::memory_order_release);
  return absl::OkStatus();
}

void BatchOrder::Settle() {
  const uint64_t in_start = plan_->batches_per_epoch(from_);
  if (batch_ < in_start) return;
  batch_ -= in_start;
  from_ = 0;
  epoch_ += 1 + batch_ / plan_->batches_per_epoch();
  batch_ %= plan_->batches_per_epoch();
  std::vector<uint64_t>().swap(windowed_);
}

void BatchOrder::Absorb(const Listing& v) {
  for (size_t w = windows_.size(); w < v.windows.size(); ++w) {
    // windowed_ holds every sample of the windows before w (none when the
    // whole listing is waited for).
    if (!whole_listing_) AppendWindowOrder(spec_, w, windowed_.size(), v.windows[w], &windowed_);
    published_ += v.windows[w];
    windows_.push_back(v.windows[w]);
  }
  if (!v.done || !failed_.ok() || plan_.has_value()) return;
  if (!v.status.ok()) {
    failed_ = v.status;
    return;
  }
  if (absl::Status s =
          MakePlan(published_, whole_listing_ ? std::vector<uint64_t>() : windows_);
      !s.ok()) {
    failed_ = s;
    return;
  }
  Settle();  // A resume may start past the end. Epoch 0 reads on in windowed_.
}

void BatchOrder::Poll() {
  if (!plan_.has_value() && ds_->streamed()) Absorb(ds_->Listed());
}

absl::Status BatchOrder::Next(const std::function<bool()>& stop, Batch* out) {
  const uint64_t size = spec_.batch_size, world = spec_.world_size;
  while (!plan_.has_value()) {
    // A streamed opening: this batch from the windows published, once they
    // hold every position of it; else wait for the next one, or the end.
    // (In 128 bits: a resume's position comes from the client.)
    const unsigned __int128 end =
        static_cast<unsigned __int128>(from_) +
        (static_cast<unsigned __int128>(batch_) + 1) * size * world;
    if (end <= windowed_.size()) {
      out->epoch = 0;
      out->index = batch_;
      out->samples.clear();
      for (uint64_t k = batch_ * size; k < (batch_ + 1) * size; ++k) {
        out->samples.push_back(windowed_[from_ + k * world + spec_.rank]);
      }
      ++batch_;
      return absl::OkStatus();
    }
    // A failed opening's published batches are served, then its error.
    if (!failed_.ok()) return failed_;
    if (stop()) return absl::CancelledError("the session is stopping");
    Absorb(ds_->WaitListed(windows_.size(), kPoll));
  }
  out->epoch = epoch_;
  out->index = batch_;
  // A streamed opening's first epoch reads on in the order it was served.
  const bool streamed = epoch_ == 0 && ds_->streamed() && !whole_listing_;
  out->samples = plan_->Batch(epoch_, from_, batch_,
                              streamed || plan_->Windowed(epoch_) ? &windowed_ : nullptr);
  if (++batch_ == plan_->batches_per_epoch(from_)) {
    batch_ = 0;
    from_ = 0;
    ++epoch_;
    std::vector<uint64_t>().swap(windowed_);
  }
  return absl::OkStatus();
}

bool BatchOrder::Canonical(uint64_t epoch) const {
  const EpochPlan* plan = this->plan();
  if (plan == nullptr || !asked_.shuffle) return false;
  return epoch > 0 || !plan->Windowed(0);  // One window is the canonical order.
}

std::pair<uint64_t, uint64_t> BatchOrder::ReplacementRange(uint64_t epoch, uint64_t index) const {
  if (epoch == 0 && whole_listing_) return {0, ds_->sample_count()};
  if (epoch == 0 && (ds_->streamed() || ds_->first_epoch_windows.size() > 1)) {
    return ds_->FirstEpochWindowAround(index);
  }
  return {0, ds_->sample_count()};
}

}  // namespace stoker
