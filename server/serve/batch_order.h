// Which dataset samples make each batch a session delivers, batch after
// batch from its start position: its EpochPlan's, epoch after epoch, drawn
// batch by batch (an epoch costs no pass over the dataset up front, but for
// a windowed first epoch, whose windows' order is held while it is read). For
// a dataset whose opening is streamed (Dataset::streamed) the first epoch's
// batches come from its windows as they are published, the same samples
// the whole plan gives them (AppendWindowOrder), and the plan is made when
// the opening ends; until then batches_per_epoch() is 0. A batch is taken
// from the published windows only when every position of it lies in them
// and no padding or drop_last can reach it: from + (b + 1) x batch_size x
// world_size <= the samples published. But a shuffled session with
// PlanSpec::canonical_first_epoch over a dataset whose windows are only its
// listing's (Dataset::windows_for_listing_only) waits for the opening's
// end and reads the canonical first epoch (the plan without windows): each
// rank's partitions, as in every later epoch, so a node caches its own
// share from the start.
//
// Thread-safety: Next() from one thread (the session's producer); the rest
// from any.
#ifndef STOKER_SERVER_SERVE_BATCH_ORDER_H_
#define STOKER_SERVER_SERVE_BATCH_ORDER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/dataset/dataset.h"
#include "server/serve/plan.h"

namespace stoker {

class BatchOrder {
 public:
  // Where a session starts: batch `batch` of epoch `epoch` read from global
  // position `from` of its order (EpochPlan::Batch); a start past that
  // epoch's end (a `from` at or past its samples included) goes on into the
  // next epochs.
  struct Start {
    uint64_t epoch = 0, from = 0, batch = 0;
  };
  // `spec` without the dataset's size and windows (taken from `ds`);
  // INVALID_ARGUMENT and FAILED_PRECONDITION as EpochPlan::Create (for a
  // streamed dataset, FAILED_PRECONDITION only from Next, at the end).
  // A streamed dataset is served from epoch 0 only (from any batch of it:
  // a resume waits for the windows its batches lie in, or, reading the
  // canonical first epoch, for the opening's end).
  static absl::StatusOr<std::unique_ptr<BatchOrder>> Create(
      PlanSpec spec, std::shared_ptr<const Dataset> ds, Start start);

  struct Batch {
    uint64_t epoch = 0, index = 0;  // The batch's epoch and number in it.
    std::vector<uint64_t> samples;
  };
  // The next batch. While a streamed opening has not published its
  // samples it waits, polling `stop` (then CANCELLED); once the opening
  // failed, the batches its windows hold (none for the canonical first
  // epoch), then its error; the plan's at its end.
  absl::Status Next(const std::function<bool()>& stop, Batch* out);

  // Takes what a streamed opening published since, without waiting: the
  // end makes the plan (batches_per_epoch()), or the error failed().
  // From Next's thread.
  void Poll();
  // The streamed opening's error (or its plan's); OK while it has none.
  // From Next's thread.
  const absl::Status& failed() const { return failed_; }

  // This rank's batches per (whole) epoch; 0 while a streamed opening goes on.
  uint64_t batches_per_epoch() const { return per_epoch_.load(std::memory_order_acquire); }
  uint64_t samples_per_epoch() const { return per_rank_.load(std::memory_order_acquire); }
  // The spec as given to Create (without the dataset's size). Immutable.
  const PlanSpec& asked() const { return asked_; }
  // The canonical partition count in effect; 0 while a streamed opening
  // goes on.
  uint32_t partitions() const { return partitions_.load(std::memory_order_acquire); }

  // From any thread: the plan once made (batches_per_epoch() != 0; null
  // before), and whether `epoch` reads the canonical order (shuffled, and
  // not a first epoch read in windows).
  const EpochPlan* plan() const {
    return per_epoch_.load(std::memory_order_acquire) != 0 ? &*plan_ : nullptr;
  }
  bool Canonical(uint64_t epoch) const;

  // Where a failed sample's stand-in is drawn from in `epoch`: [first,
  // first + size). In a windowed first epoch its window (what a streamed
  // opening is sure to have), else the whole dataset.
  std::pair<uint64_t, uint64_t> ReplacementRange(uint64_t epoch, uint64_t index) const;

 private:
  BatchOrder(PlanSpec spec, std::shared_ptr<const Dataset> ds);
  absl::Status MakePlan(uint64_t samples, std::vector<uint64_t> windows);
  // With a plan: moves a start past its epoch's end on into the next.
  void Settle();
  void Absorb(const Listing& v);

  const PlanSpec asked_;
  PlanSpec spec_;
  const std::shared_ptr<const Dataset> ds_;
  std::optional<EpochPlan> plan_;
  std::atomic<uint64_t> per_epoch_{0}, per_rank_{0};
  std::atomic<uint32_t> partitions_{0};
  uint64_t epoch_ = 0, batch_ = 0;
  uint64_t from_ = 0;  // Where epoch_ is read from (a start's epoch only).
  // The global order of a windowed first epoch while it is read: a
  // streamed opening's windows as they are published, else the plan's.
  std::vector<uint64_t> windowed_;
  std::vector<uint64_t> windows_;
  uint64_t published_ = 0;  // The samples of windows_.
  // The first epoch is the canonical one, after the whole listing.
  const bool whole_listing_;
  absl::Status failed_;  // The streamed opening's error.
};

}  // namespace stoker

#endif  // STOKER_SERVER_SERVE_BATCH_ORDER_H_
