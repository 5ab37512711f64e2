#include "server/serve/batch_order.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/dataset/dataset_growth.h"
#include "util/status_macros.h"

namespace stoker {
namespace {

// How often a wait for the next window looks at `stop`.
constexpr absl::Duration kPoll = absl::Milliseconds(50);

}  // namespace

BatchOrder::BatchOrder(PlanSpec spec, std::shared_ptr<const Dataset> ds)
    : spec_(std::move(spec)), ds_(std::move(ds)) {}

absl::StatusOr<std::unique_ptr<BatchOrder>> BatchOrder::Create(
    PlanSpec spec, std::shared_ptr<const Dataset> ds, uint64_t start_epoch,
    uint64_t start_batch) {
  std::unique_ptr<BatchOrder> o(new BatchOrder(std::move(spec), std::move(ds)));
  if (o->ds_->growth == nullptr) {
    STOKER_RETURN_IF_ERROR(o->MakePlan(o->ds_->samples.size(), o->ds_->first_epoch_windows));
    const uint64_t per_epoch = o->plan_->batches_per_epoch();
    o->epoch_ = start_epoch + start_batch / per_epoch;
    o->batch_ = start_batch % per_epoch;
    o->order_ = o->plan_->RankOrder(o->epoch_);
    return o;
  }
  if (start_epoch != 0) {
    return absl::InternalError("a streamed opening serves from the first epoch only");
  }
  o->batch_ = start_batch;  // Its windows' positions do not depend on the end.
  // The spec's own errors now, as for any dataset.
  PlanSpec check = o->spec_;
  check.num_samples = uint64_t{1} << 62;
  check.first_epoch_windows.clear();
  STOKER_RETURN_IF_ERROR(EpochPlan::Create(check).status());
  return o;
}

absl::Status BatchOrder::MakePlan(uint64_t samples, std::vector<uint64_t> windows) {
  spec_.num_samples = samples;
  spec_.first_epoch_windows = std::move(windows);
  STOKER_ASSIGN_OR_RETURN(EpochPlan plan, EpochPlan::Create(spec_));
  plan_.emplace(std::move(plan));
  per_rank_.store(plan_->samples_per_epoch(), std::memory_order_release);
  per_epoch_.store(plan_->batches_per_epoch(), std::memory_order_release);
  return absl::OkStatus();
}

void BatchOrder::Absorb(const DatasetGrowth::View& v) {
  for (size_t w = windows_.size(); w < v.windows.size(); ++w) {
    // streamed_ holds every sample of the windows before w.
    AppendWindowOrder(spec_, w, streamed_.size(), v.windows[w], &streamed_);
    windows_.push_back(v.windows[w]);
  }
  if (!v.done || !failed_.ok() || plan_.has_value()) return;
  if (!v.status.ok()) {
    failed_ = v.status;
    return;
  }
  if (absl::Status s = MakePlan(streamed_.size(), windows_); !s.ok()) {
    failed_ = s;
    return;
  }
  std::vector<uint64_t>().swap(streamed_);
  epoch_ = batch_ / plan_->batches_per_epoch();  // A resume may start past the end.
  batch_ %= plan_->batches_per_epoch();
  order_ = plan_->RankOrder(epoch_);
}

void BatchOrder::Poll() {
  if (!plan_.has_value() && ds_->growth != nullptr) Absorb(ds_->growth->Now());
}

absl::Status BatchOrder::Next(const std::function<bool()>& stop, Batch* out) {
  const uint64_t size = spec_.batch_size, world = spec_.world_size;
  while (!plan_.has_value()) {
    // A streamed opening: this batch from the windows published, once they
    // hold every position of it; else wait for the next one, or the end.
    if ((batch_ + 1) * size * world <= streamed_.size()) {
      out->epoch = 0;
      out->index = batch_;
      out->samples.clear();
      for (uint64_t k = batch_ * size; k < (batch_ + 1) * size; ++k) {
        out->samples.push_back(streamed_[k * world + spec_.rank]);
      }
      ++batch_;
      return absl::OkStatus();
    }
    // A failed opening's published batches are served, then its error.
    if (!failed_.ok()) return failed_;
    if (stop()) return absl::CancelledError("the session is stopping");
    Absorb(ds_->growth->Wait(windows_.size(), kPoll));
  }
  const uint64_t first = batch_ * size;
  const uint64_t count = std::min<uint64_t>(size, order_.size() - first);
  out->epoch = epoch_;
  out->index = batch_;
  out->samples.assign(order_.begin() + first, order_.begin() + first + count);
  if (++batch_ == plan_->batches_per_epoch()) {
    batch_ = 0;
    order_ = plan_->RankOrder(++epoch_);
  }
  return absl::OkStatus();
}

std::pair<uint64_t, uint64_t> BatchOrder::ReplacementRange(uint64_t epoch, uint64_t index) const {
  if (epoch == 0 && ds_->growth != nullptr) return ds_->growth->WindowAround(index);
  if (epoch == 0 && ds_->first_epoch_windows.size() > 1) {
    return WindowAround(ds_->first_epoch_windows, index);
  }
  return {0, ds_->sample_count()};
}

}  // namespace stoker
