// The samples of a dataset whose opening goes on after its sessions begin
// (a streamed opening: shards indexed as the first batches are served).
// The opener appends samples in the dataset's order and publishes them a
// whole window of the first epoch's order (Dataset::first_epoch_windows) at
// a time; sessions read the samples published so far, which never move or
// change, and wait for the next window or the end. The end is the
// opening's status: OK with every window published, or the error that
// stopped it (the sessions' error too).
//
// Samples live in segments allocated as they fill, under a directory sized
// once from the most samples the dataset may hold, so a reader's sample
// never moves while the writer appends.
//
// Thread-safety: one writer thread calls Append, PublishWindow and Finish;
// any thread calls the rest. The writer holds the growth as long as it
// writes; the dataset holds it through CancelOnDrop, so that dropping the
// dataset asks the writer to stop (cancelled()) without waiting for it.
#ifndef STOKER_SERVER_DATASET_DATASET_GROWTH_H_
#define STOKER_SERVER_DATASET_DATASET_GROWTH_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/dataset/dataset.h"

namespace stoker {

class DatasetGrowth {
 public:
  // At most `capacity` samples in `windows` windows (both known from the
  // listing before anything is indexed).
  DatasetGrowth(uint64_t capacity, size_t windows);
  DatasetGrowth(const DatasetGrowth&) = delete;
  DatasetGrowth& operator=(const DatasetGrowth&) = delete;

  // --- The writer.
  // INTERNAL past the capacity (the opener's bound was wrong).
  absl::Status Append(Sample s);
  // The samples appended since the last window are the next window.
  void PublishWindow();
  // The end: with OK, every window was published; `num_classes` is the
  // labels' class count. Later calls are ignored.
  void Finish(absl::Status status, uint32_t num_classes = 0);
  // Held for the dataset's life (its RAM charges).
  void Hold(std::shared_ptr<void> kept);

  // The dataset was dropped: the writer stops at its next check.
  void Cancel() { cancel_.store(true); }
  const std::atomic<bool>* cancelled() const { return &cancel_; }
  // A guess of the dataset's size for decisions made before the end (what
  // the caches may keep): set by the writer, the published count until then.
  // (At most the capacity.)
  void SetExpected(uint64_t samples) {
    expected_.store(std::min(samples, capacity_), std::memory_order_relaxed);
  }
  // The remote requests and bytes the whole opening made (before Finish):
  // the first epoch's, beside Dataset::read_ahead_*, its first window's.
  void SetReads(uint64_t requests, uint64_t bytes) {
    reads_[0].store(requests, std::memory_order_relaxed);
    reads_[1].store(bytes, std::memory_order_relaxed);
  }
  std::pair<uint64_t, uint64_t> reads() const {
    return {reads_[0].load(std::memory_order_relaxed), reads_[1].load(std::memory_order_relaxed)};
  }

  // Every sample, moved out, once it ended with no reader left (an
  // opening that was not streamed after all).
  std::vector<Sample> TakeAll();

  // --- Readers.
  uint64_t published_samples() const { return published_.load(std::memory_order_acquire); }
  // Sample i < published_samples().
  const Sample& sample(uint64_t i) const {
    return segments_[i >> kSegmentBits][i & (kSegmentSamples - 1)];
  }
  uint64_t expected_samples() const;
  using View = Listing;  // Its windows: those published, in order.
  View Now() const;
  // Now(), once more than `known` windows are published or it ended, or
  // after `timeout`.
  View Wait(size_t known, absl::Duration timeout) const;
  // The published window holding sample `i`: its first sample and size.
  std::pair<uint64_t, uint64_t> WindowAround(uint64_t i) const;
  size_t windows_expected() const { return windows_expected_; }

 private:
  static constexpr int kSegmentBits = 12;
  static constexpr uint64_t kSegmentSamples = uint64_t{1} << kSegmentBits;

  const uint64_t capacity_;
  const size_t windows_expected_;
  std::unique_ptr<std::unique_ptr<Sample[]>[]> segments_;  // Fixed directory.
  uint64_t appended_ = 0;         // The writer's.
  uint64_t window_start_ = 0;     // The writer's: where its open window began.
  std::atomic<uint64_t> published_{0};
  std::atomic<uint64_t> expected_{0};
  std::atomic<uint64_t> reads_[2] = {0, 0};
  std::atomic<bool> cancel_{false};
  mutable absl::Mutex mu_;
  std::vector<uint64_t> windows_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  uint32_t num_classes_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::shared_ptr<void>> held_ ABSL_GUARDED_BY(mu_);

};

// What a dataset holds of `growth`: when its last copy goes, the growth is
// cancelled and, where the writer runs on `writer` (a thread of the
// opening's own, not the daemon's background work), that thread joined.
std::shared_ptr<DatasetGrowth> CancelOnDrop(std::shared_ptr<DatasetGrowth> growth,
                                            std::thread writer = std::thread());

// Starts a streamed opening's writer: `write` (which ends the growth
// itself, OK or not) on `limits.background`, or on a thread of its own
// where there is none, and returns the dataset's handle (CancelOnDrop) once
// a window is published. The growth's error if it ended with none;
// UNAVAILABLE naming `what` if the writer could not start.
absl::StatusOr<std::shared_ptr<DatasetGrowth>> GrowInBackground(
    std::shared_ptr<DatasetGrowth> growth, const ScanLimits& limits,
    std::function<void()> write, const std::string& what);

}  // namespace stoker

#endif  // STOKER_SERVER_DATASET_DATASET_GROWTH_H_
