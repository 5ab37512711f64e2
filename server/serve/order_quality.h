// How well a shuffled epoch's order mixes the dataset, as a session's
// stats report it (SessionStats.order), measured on the epoch's first
// global steps from position 0 (at most kMeasuredSteps of them and
// kMeasuredPositions positions): the canonical order is alike throughout,
// a step of s positions holding the next s partitions of the round-robin.
//
// - partitions per step: how many canonical partitions a global step's
//   samples (batch_size x world_size positions) were placed in; at most
//   min(step, C), fewer where an exchange brings two from one partition.
//   It does not change with the affinity: each rank reads its own
//   partitions, but every step holds every rank's.
// - spread: the mean gap between consecutive samples of the order over
//   the dataset's size: 1/3 for a uniform permutation, 0 for an index
//   order.
//
// MeasureOrder is a pure function. OrderQualityReport is measured by the
// session's producer as each epoch begins, so a stats call (under the
// daemon's lock) only copies it; thread-safe.
#ifndef STOKER_SERVER_SERVE_ORDER_QUALITY_H_
#define STOKER_SERVER_SERVE_ORDER_QUALITY_H_

#include <cstdint>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/serve/batch_order.h"
#include "server/serve/canonical_order.h"

namespace stoker {

struct OrderQuality {
  uint64_t epoch = 0;
  uint32_t partitions = 0;  // C in effect.
  uint64_t step = 0;        // A global step's positions.
  uint64_t steps = 0;       // Global steps measured.
  double partitions_per_step = 0;
  double spread = 0;
  // The exchange: samples each partition gives another, whether they are
  // drawn within as many mean-sized samples' bytes, and in how many
  // partitions that bound could not hold.
  uint64_t exchanged = 0;
  bool by_bytes = false;
  uint32_t over_budget = 0;  // Partitions whose E went past E mean-sized.
};

// The global steps measured at most, and their positions at most.
constexpr uint64_t kMeasuredSteps = 64;
constexpr uint64_t kMeasuredPositions = uint64_t{1} << 16;

// `epoch` of `order` read in global steps of `step` positions: its first
// full steps within kMeasuredSteps and kMeasuredPositions (at least one:
// the whole order where it is shorter than a step, a step's first
// kMeasuredPositions where it is longer).
OrderQuality MeasureOrder(const CanonicalOrder& order, uint64_t epoch, uint64_t step);

// A session's measure of the last epoch it began producing (its ring
// holds a few batches ahead of the trainer).
class OrderQualityReport {
 public:
  // From the producer, as it begins `epoch` of `order`: measures it when
  // it reads the canonical order (shuffled, not a first epoch read in
  // windows); else the report is none until one does.
  void Measure(const BatchOrder& order, uint64_t epoch);
  std::optional<OrderQuality> Last() const;

 private:
  mutable absl::Mutex mu_;
  std::optional<OrderQuality> last_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_SERVER_SERVE_ORDER_QUALITY_H_
