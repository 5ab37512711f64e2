// How well a shuffled epoch's order mixes the dataset, as a session's
// stats report it (SessionStats.order): measured on the epoch's first
// global steps, as the canonical order is alike throughout (each step
// takes the next round of every partition).
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
// MeasureOrder is a pure function; OrderQualityReport is thread-safe.
#ifndef STOKER_SERVER_SERVE_ORDER_QUALITY_H_
#define STOKER_SERVER_SERVE_ORDER_QUALITY_H_

#include <cstdint>
#include <optional>

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
};

// The global steps measured at most, and their positions at most.
constexpr uint64_t kMeasuredSteps = 64;
constexpr uint64_t kMeasuredPositions = uint64_t{1} << 16;

// `epoch` of `order` read in global steps of `step` positions: its first
// full steps within kMeasuredSteps and kMeasuredPositions (at least one:
// the whole order where it is shorter than a step, a step's first
// kMeasuredPositions where it is longer).
OrderQuality MeasureOrder(const CanonicalOrder& order, uint64_t epoch, uint64_t step);

// A session's measure of the epoch it reads: measured once per epoch, on
// the first call that finds it reading one of the canonical order.
class OrderQualityReport {
 public:
  // None before the plan is made, or while the epoch read is a first
  // epoch read in windows, or unshuffled.
  std::optional<OrderQuality> For(const BatchOrder& order);

 private:
  absl::Mutex mu_;
  std::optional<OrderQuality> last_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_SERVER_SERVE_ORDER_QUALITY_H_
