// EngineSplit: which share of a session's JPEGs a second decode engine (the
// GPU's JPEG engine) takes, the rest going to the node's CPU pool, chosen by
// the batches per second the session delivers at each share, not by the
// engines' own rates: what one engine's work costs the other (host threads
// that feed the GPU, PCIe, the trainer's own use of the GPU) shows in the
// delivered rate alone. So the split is never slower than the CPU alone: a
// share that does not beat the CPU alone by more than the tolerance is not
// kept.
//
// The caller runs rounds of `window` batches at share() and reports each
// with Observe(batches, seconds). The controller measures the CPU alone
// (share 0) first, then the start share (Hint's balance of the engines'
// rates, else 1/2), then climbs: it measures the shares a step above and
// below the best so far, moves to a better one (better by more than the
// tolerance) or halves the step, and settles once the step is below
// min_step. Settled, it holds its share; after `recheck_rounds` rounds, or
// at once when two rounds in a row fall more than twice the tolerance
// below the rate it settled at (an engine another session now shares) or
// below the CPU alone's, it measures the CPU alone and its share again and
// climbs afresh. Options are bounded (steps 1/1024..1/2). A
// disabled engine (Disable: no GPU, the engine refused) gives share 0 for
// good.
//
// Deterministic: a function of the reports. Not thread-safe: one session's
// producer calls it.
#ifndef STOKER_SERVER_POOL_ENGINE_SPLIT_H_
#define STOKER_SERVER_POOL_ENGINE_SPLIT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace stoker {

struct EngineSplitOptions {
  uint32_t window = 8;         // Batches per round.
  double tolerance = 0.03;     // A share is better only by more than this.
  double first_step = 0.25;    // The climb's first step.
  double min_step = 1.0 / 32;  // Settled below this step.
  uint32_t recheck_rounds = 256;
};

class EngineSplit {
 public:
  enum class Phase { kBaseline, kStart, kClimb, kSettled, kDisabled };

  explicit EngineSplit(EngineSplitOptions options = {});

  // The engines' own rates (images per second each alone, e.g. from a
  // calibration): the start share balances them, gpu / (cpu + gpu).
  void Hint(double cpu_rate, double gpu_rate);
  // The engine cannot be used (`why` for stats): share 0 from now on.
  void Disable(std::string why);

  // The share of the next round's JPEGs the engine decodes, 0..1.
  double share() const { return share_; }
  uint32_t window() const { return options_.window; }
  Phase phase() const { return phase_; }
  const std::string& disabled_why() const { return why_; }
  // The CPU alone's last measured rate (batches/s; 0 before it is).
  double cpu_alone() const { return cpu_alone_; }
  // The kept share's last measured rate (batches/s).
  double kept_rate() const { return best_rate_; }

  // A round at share(): `batches` delivered in `seconds`. A round of no
  // batches or no time is ignored.
  void Observe(uint64_t batches, double seconds);

 private:
  bool Beats(double rate, double than) const;
  void Measured(double rate);
  void NextProbes();  // Around the best share, halving the step while none is new.
  void Settle();

  const EngineSplitOptions options_;
  Phase phase_ = Phase::kBaseline;
  std::string why_;
  double share_ = 0;
  double start_ = 0.5;   // The next climb's first share.
  double hinted_ = 0.5;  // Hint's balance (1/2 without one).
  double cpu_alone_ = 0;
  double best_share_ = 0, best_rate_ = 0;  // The climb's centre.
  double step_ = 0;
  std::vector<double> probes_;  // Still to measure this step, in order.
  double probe_best_share_ = 0, probe_best_rate_ = 0;
  uint32_t settled_rounds_ = 0;
  double settled_rate_ = 0, last_rate_ = 0;  // Settled: its rate then; the last round's.
};

}  // namespace stoker

#endif  // STOKER_SERVER_POOL_ENGINE_SPLIT_H_
