// How many requests an object store client keeps in flight: a limit that
// follows what the store answers, as TCP Vegas does with packets.
//
// Each answered request reports its time to first byte (a property of the
// path and the store's queue, not of the object's size). The lowest such
// time with few requests in flight is the path's own latency (`base`); a
// smoothed average of recent ones (`rtt`) includes the store's queue. With
// L requests in flight, L x (1 - base / rtt) of them are queued at the
// store: that many add latency and no throughput.
//
// While requests wait for a slot:
// - from `initial`, one more per answered request (doubling each round
//   trip) until the queue passes kMostQueued or the first throttle;
// - then once per window of as many answers as the limit: one more while
//   fewer than kFewestQueued are queued, one fewer past kMostQueued.
// A throttle (503 SlowDown, 429, a timeout) halves it. It stays within
// [min, max].
//
// A store kept busy never answers at its unqueued latency, and a path can
// get slower, so every kProbeEvery answers `base` is measured again: the
// limit drops to `min` until that few are in flight, the lowest of the
// next `min` answers is the new base, and the limit is restored (BBR's
// ProbeRTT; it costs a round trip at low concurrency).
//
// Not thread-safe: the client's event thread owns it.
#ifndef STOKER_SERVER_OBJSTORE_IN_FLIGHT_LIMIT_H_
#define STOKER_SERVER_OBJSTORE_IN_FLIGHT_LIMIT_H_

#include "absl/time/time.h"

namespace stoker {

class InFlightLimit {
 public:
  static constexpr double kFewestQueued = 4;
  static constexpr double kMostQueued = 10;
  static constexpr int kProbeEvery = 1024;

  InFlightLimit(int min, int initial, int max);

  // A request answered well, its first byte after `first_byte`;
  // `in_flight`: requests still in flight after it; `waiting`: whether
  // requests wait for a slot (only then does the limit grow).
  void Answered(absl::Duration first_byte, int in_flight, bool waiting);
  // A throttle or a timeout.
  void Throttled();

  int limit() const { return limit_; }
  // Requests estimated queued at the store at the current limit.
  double queued() const;

 private:
  enum class Probe { kNone, kDraining, kMeasuring };

  // The probe's steps; true while it holds the limit down.
  bool Probing(absl::Duration first_byte, int in_flight);

  const int min_, max_;
  int limit_;
  bool slow_start_ = true;
  int window_ = 0;
  absl::Duration base_ = absl::InfiniteDuration();
  absl::Duration rtt_ = absl::ZeroDuration();
  int answers_ = 0;  // Since the last probe.
  Probe probe_ = Probe::kNone;
  int probe_left_ = 0;
  int saved_limit_ = 0;
  absl::Duration probe_base_ = absl::InfiniteDuration();
};

}  // namespace stoker

#endif  // STOKER_SERVER_OBJSTORE_IN_FLIGHT_LIMIT_H_
