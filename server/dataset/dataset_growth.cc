#include "server/dataset/dataset_growth.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace stoker {

DatasetGrowth::DatasetGrowth(uint64_t capacity, size_t windows)
    : capacity_(capacity),
      windows_expected_(windows),
      segments_(new std::unique_ptr<Sample[]>[capacity / kSegmentSamples + 1]) {}

std::shared_ptr<DatasetGrowth> CancelOnDrop(std::shared_ptr<DatasetGrowth> growth,
                                            std::thread writer) {
  struct Handle {
    Handle(std::shared_ptr<DatasetGrowth> g, std::thread w)
        : growth(std::move(g)), writer(std::move(w)) {}
    std::shared_ptr<DatasetGrowth> growth;
    std::thread writer;
    ~Handle() {
      growth->Cancel();
      if (writer.joinable()) writer.join();
    }
  };
  DatasetGrowth* const g = growth.get();
  auto handle = std::make_shared<Handle>(std::move(growth), std::move(writer));
  return std::shared_ptr<DatasetGrowth>(std::move(handle), g);
}

absl::StatusOr<std::shared_ptr<DatasetGrowth>> GrowInBackground(
    std::shared_ptr<DatasetGrowth> growth, const ScanLimits& limits,
    std::function<void()> write, const std::string& what) {
  std::shared_ptr<DatasetGrowth> handle;
  if (limits.background != nullptr) {
    if (!limits.background(std::move(write))) {
      return absl::UnavailableError(absl::StrCat(
          what, " could not begin (the daemon is stopping, or out of threads)"));
    }
    handle = CancelOnDrop(growth);
  } else {
    handle = CancelOnDrop(growth, std::thread(std::move(write)));
  }
  DatasetGrowth::View v;
  for (size_t known = 0; (v = growth->Wait(known, absl::InfiniteDuration())),
                         !v.done && growth->published_samples() == 0;) {
    known = v.windows.size();
  }
  if (growth->published_samples() == 0) return v.status;  // The handle waits for its thread.
  return handle;
}

absl::Status DatasetGrowth::Append(Sample s) {
  if (appended_ >= capacity_) {
    return absl::InternalError(
        absl::StrCat("more than the ", capacity_, " samples the opening allowed for"));
  }
  std::unique_ptr<Sample[]>& segment = segments_[appended_ >> kSegmentBits];
  if (segment == nullptr) segment.reset(new Sample[kSegmentSamples]);
  segment[appended_ & (kSegmentSamples - 1)] = std::move(s);
  ++appended_;
  return absl::OkStatus();
}

void DatasetGrowth::PublishWindow() {
  absl::MutexLock lock(&mu_);
  if (done_) return;
  windows_.push_back(appended_ - window_start_);
  window_start_ = appended_;
  // Before the waiters wake (with the unlock): they see the samples too.
  published_.store(appended_, std::memory_order_release);
}

void DatasetGrowth::Finish(absl::Status status, uint32_t num_classes) {
  absl::MutexLock lock(&mu_);
  if (done_) return;
  done_ = true;
  status_ = std::move(status);
  num_classes_ = num_classes;
}



void DatasetGrowth::Hold(std::shared_ptr<void> kept) {
  absl::MutexLock lock(&mu_);
  held_.push_back(std::move(kept));
}

std::vector<Sample> DatasetGrowth::TakeAll() {
  std::vector<Sample> out;
  out.reserve(appended_);
  for (uint64_t i = 0; i < appended_; ++i) {
    out.push_back(std::move(segments_[i >> kSegmentBits][i & (kSegmentSamples - 1)]));
  }
  for (uint64_t s = 0; s <= capacity_ / kSegmentSamples; ++s) segments_[s].reset();
  appended_ = window_start_ = 0;
  published_.store(0, std::memory_order_release);
  return out;
}

uint64_t DatasetGrowth::expected_samples() const {
  return std::max(expected_.load(std::memory_order_relaxed), published_samples());
}

DatasetGrowth::View DatasetGrowth::Now() const {
  absl::MutexLock lock(&mu_);
  return View{windows_, done_, status_, num_classes_};
}

DatasetGrowth::View DatasetGrowth::Wait(size_t known, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto more = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return done_ || windows_.size() > known;
  };
  mu_.AwaitWithTimeout(absl::Condition(&more), timeout);
  return View{windows_, done_, status_, num_classes_};
}

std::pair<uint64_t, uint64_t> DatasetGrowth::WindowAround(uint64_t i) const {
  absl::MutexLock lock(&mu_);
  return stoker::WindowAround(windows_, i);
}

}  // namespace stoker
