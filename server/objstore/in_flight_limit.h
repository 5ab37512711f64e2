// How many requests to one endpoint an object store client keeps in
// flight: a limit that follows what the store answers, as TCP Vegas does
// with packets.
//
// Each answered GET reports its time to first byte less connection setup
// (a property of the path and the store's queue, not of the object's
// size) and how many requests were in flight when it was sent. `base` is
// the path's own latency: the lowest such time seen, replaced by the
// lowest of kBaseSamples answers sent with at most `min` in flight (so it
// follows a path that got slower); `rtt` a smoothed average of all of
// them, which includes the store's queue. With L requests in flight,
// L x (1 - base / rtt) of them are queued at the store: that many add
// latency and no throughput.
//
// While requests wait for a slot:
// - from `initial`, one more per answer (doubling each round trip) until
//   the queue passes kMostQueued or the first throttle;
// - then once per window of as many answers as the limit: one more while
//   fewer than kFewestQueued are queued, one fewer past kMostQueued.
// A throttle (503 SlowDown, 429, a timeout) halves it. It stays within
// [min, max].
//
// A store kept busy sends no answer at low load, so every kProbeEvery the
// limit drops to `min` for at most 4 rtt (within [kProbeShortest,
// kProbeLongest]): long enough for requests sent at low load to measure
// the base, then it is restored (BBR's ProbeRTT; at most 4 round trips in
// each 10 s: 2 % of the time at 50 ms per request).
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
  static constexpr int kBaseSamples = 8;
  static constexpr absl::Duration kProbeEvery = absl::Seconds(10);
  static constexpr absl::Duration kProbeShortest = absl::Milliseconds(20);
  static constexpr absl::Duration kProbeLongest = absl::Milliseconds(500);

  InFlightLimit(int min, int initial, int max);

  // A GET answered well at `now`, its first byte after `first_byte`;
  // `sent_with`: requests in flight when it was sent, itself included;
  // `waiting`: whether requests wait for a slot (only then does the limit
  // grow).
  void Answered(absl::Duration first_byte, int sent_with, bool waiting, absl::Time now);
  // A throttle or a timeout.
  void Throttled();
  // Ends a probe past its time (called as requests are started).
  void Tick(absl::Time now);

  int limit() const { return limit_; }
  bool probing() const { return probe_until_ != absl::InfinitePast(); }
  // Requests estimated queued at the current limit.
  double queued() const;

 private:
  void EndProbe(absl::Time now);

  const int min_, max_;
  int limit_;
  bool slow_start_ = true;
  int window_ = 0;
  absl::Duration base_ = absl::InfiniteDuration();
  absl::Duration low_load_base_ = absl::InfiniteDuration();
  int low_load_samples_ = 0;
  absl::Duration rtt_ = absl::ZeroDuration();
  absl::Time next_probe_ = absl::InfiniteFuture();  // Set at the first answer.
  absl::Time probe_until_ = absl::InfinitePast();   // Past: not probing.
  int saved_limit_ = 0;
};

}  // namespace stoker

#endif  // STOKER_SERVER_OBJSTORE_IN_FLIGHT_LIMIT_H_
