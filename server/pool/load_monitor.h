// LoadMonitor: the daemon's control loop without the daemon. Callers report
// cumulative counters every tick (time injected, so tests need no sleeps);
// it keeps the recent windows, answers each session's diagnosis, and
// proposes pool resizes (tf.data service's AutoScaler is the model: callers
// report, it answers).
//
// Diagnosis, from the session's window (EWMA over ticks):
//   consumer-bound      the ring stays full: the trainer is the bottleneck.
//   decode-bound        the client waits and decode/transform is where its
//                       samples spend their time (its node's decode pool
//                       is busy).
//   starved-by-fair-share  its node's decode pool is saturated and this
//                       session gets less than its share of it (among the
//                       sessions of that node).
//   read-bound          the client waits and the reader stage is measurably
//                       the wait: its samples spend most of their time in
//                       reads, or the reader pool is saturated. Never by
//                       elimination.
//   latency-bound       the client waits, yet no stage is busy: too few
//                       batches in flight (more ring slots help).
//   balanced            the client rarely waits.
//   warming-up          fewer ticks than the window needs.
//
// Not thread-safe: the daemon calls it under its own lock.
#ifndef STOKER_SERVER_POOL_LOAD_MONITOR_H_
#define STOKER_SERVER_POOL_LOAD_MONITOR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "proto/spec_util.h"
#include "proto/stoker.pb.h"

namespace stoker {

class LoadMonitor {
 public:
  struct Options {
    double alpha = 0.3;      // EWMA weight of the newest tick.
    int warmup_ticks = 4;    // Ticks before a session is diagnosed.
    int ticks_per_tune = 4;  // Ticks between autotune decisions.
    int min_reader_threads = 64, max_reader_threads = 1024;
  };
  // Cumulative counters of one pool.
  struct PoolReport {
    int threads = 1;
    uint64_t busy_ns = 0;
  };
  // Cumulative counters of one session, and its ring's fill now.
  struct SessionReport {
    uint64_t id = 0;
    uint64_t samples = 0;         // Finished samples.
    uint64_t client_wait_ns = 0;  // Time its trainer waited in next().
    uint64_t read_ns = 0;         // Its samples' time in the reader stage.
    uint64_t work_ns = 0;         // Their time in decode + transform.
    double ring_fill = 0;         // Ready slots / slots.
    int node = 0;                 // Whose decode pool serves it.
  };
  struct SessionView {
    v1::Diagnosis diagnosis = v1::DIAGNOSIS_WARMING_UP;
    double ring_fill = 0, wait_fraction = 0, samples_per_second = 0;
    double share = 1;       // Of the samples finished across sessions.
    double read_share = 0;  // Of its samples' time spent reading.
  };
  // A proposed resize: pool "decode" (of `node`) or "reader" to `threads`.
  struct Decision {
    std::string pool;
    int node = -1;
    int threads = 0;
    std::string why;
  };

  explicit LoadMonitor(const Options& options) : options_(options) {}

  // One tick at `now_ns`, with the decode pool of every node. Sessions not
  // reported are forgotten.
  void Tick(uint64_t now_ns, const std::vector<PoolReport>& decode,
            const PoolReport& reader, const std::vector<SessionReport>& sessions);

  // The session's window; a default view for an unknown one.
  SessionView Session(uint64_t id) const;
  double decode_busy(int node = 0) const {
    return node < static_cast<int>(decode_.size()) ? decode_[node].busy : 0;
  }
  double reader_busy() const { return reader_.busy; }

  // A session for FairThreads: its node, weight (priority) and owner
  // (-1: none; such sessions count as one user).
  struct Share {
    uint64_t id = 0;
    int node = 0;
    int weight = 1;
    int64_t user = -1;
  };
  // Each session's fair part of its node's decode threads (`node_threads`),
  // in the order given, as ThreadPool shares them: an equal part for each
  // user with sessions producing on the node at the last Tick, split among
  // that user's producing sessions by weight; a session not producing is
  // counted with them (and its user) for its own share.
  std::vector<double> FairThreads(const std::vector<int>& node_threads,
                                  const std::vector<Share>& sessions) const;

  // At most one resize per ticks_per_tune ticks, after Tick: the decode
  // pool of a node whose sessions wait on decode grows (up to its
  // `max_decode` entry), one whose sessions are all consumer-bound shrinks;
  // else the reader pool doubles or halves.
  std::optional<Decision> Autotune(const std::vector<int>& decode_threads,
                                   const std::vector<int>& max_decode,
                                   int reader_threads);

 private:
  struct Pool {
    uint64_t busy_ns = 0;
    double busy = 0;
  };
  struct Window {
    SessionReport last;
    SessionView view;
    int ticks = 0;
  };
  void Measure(Pool* pool, const PoolReport& report, double dt);
  double Ewma(double old, double sample) const {
    return old + options_.alpha * (sample - old);
  }
  v1::Diagnosis Diagnose(const SessionView& w, double decode_busy, int sessions) const;

  const Options options_;
  uint64_t last_ns_ = 0;
  bool started_ = false;
  std::vector<Pool> decode_;  // Per node.
  Pool reader_;
  absl::flat_hash_map<uint64_t, Window> windows_;
  int ticks_since_tune_ = 0;
};

}  // namespace stoker

#endif  // STOKER_SERVER_POOL_LOAD_MONITOR_H_
