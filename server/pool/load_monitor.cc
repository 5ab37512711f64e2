#include "server/pool/load_monitor.h"

#include <algorithm>
#include <map>


namespace stoker {

void LoadMonitor::Measure(Pool* pool, const PoolReport& report, double dt) {
  if (dt > 0) {
    const double busy =
        (report.busy_ns - pool->busy_ns) * 1e-9 / (dt * std::max(1, report.threads));
    pool->busy = Ewma(pool->busy, std::min(1.0, busy));
  }
  pool->busy_ns = report.busy_ns;
}

void LoadMonitor::Tick(uint64_t now_ns, const std::vector<PoolReport>& decode,
                       const PoolReport& reader,
                       const std::vector<SessionReport>& sessions) {
  const double dt = started_ ? (now_ns - last_ns_) * 1e-9 : 0;
  last_ns_ = now_ns;
  decode_.resize(decode.size());
  if (!started_) {  // The first tick only sets the baselines.
    started_ = true;
    for (size_t n = 0; n < decode.size(); ++n) Measure(&decode_[n], decode[n], 0);
    Measure(&reader_, reader, 0);
    for (const SessionReport& r : sessions) windows_[r.id].last = r;
    return;
  }
  if (dt <= 0) return;
  for (size_t n = 0; n < decode.size(); ++n) Measure(&decode_[n], decode[n], dt);
  Measure(&reader_, reader, dt);
  // Shares are among the sessions of one node: they share its pool.
  absl::flat_hash_map<int, uint64_t> total;
  absl::flat_hash_map<int, int> per_node;
  absl::flat_hash_map<uint64_t, Window> next;
  for (const SessionReport& r : sessions) {
    auto it = windows_.find(r.id);
    Window w = it == windows_.end() ? Window{r, {}, 0} : it->second;
    total[r.node] += r.samples - w.last.samples;
    ++per_node[r.node];
    next[r.id] = w;
  }
  for (const SessionReport& r : sessions) {
    Window& w = next[r.id];
    SessionView& v = w.view;
    const uint64_t samples = r.samples - w.last.samples;
    const uint64_t read = r.read_ns - w.last.read_ns, work = r.work_ns - w.last.work_ns;
    v.ring_fill = w.ticks == 0 ? r.ring_fill : Ewma(v.ring_fill, r.ring_fill);
    v.wait_fraction = Ewma(
        v.wait_fraction, std::min(1.0, (r.client_wait_ns - w.last.client_wait_ns) * 1e-9 / dt));
    v.samples_per_second = Ewma(v.samples_per_second, samples / dt);
    const uint64_t node_total = total[r.node];
    v.share = Ewma(v.share, node_total ? static_cast<double>(samples) / node_total : 1.0);
    if (read + work > 0) {
      v.read_share = Ewma(v.read_share, static_cast<double>(read) / (read + work));
    }
    w.last = r;
    if (++w.ticks >= options_.warmup_ticks) {
      v.diagnosis = Diagnose(v, decode_busy(r.node), per_node[r.node]);
    }
  }
  windows_ = std::move(next);
}

v1::Diagnosis LoadMonitor::Diagnose(const SessionView& w, double decode_busy,
                                    int sessions) const {
  if (w.ring_fill >= 0.75) return v1::DIAGNOSIS_CONSUMER_BOUND;
  if (decode_busy >= 0.8) {
    return sessions > 1 && w.share < 0.8 / sessions
               ? v1::DIAGNOSIS_STARVED_BY_FAIR_SHARE
               : v1::DIAGNOSIS_DECODE_BOUND;
  }
  if (w.wait_fraction < 0.05) return v1::DIAGNOSIS_BALANCED;
  // The client waits: name the stage its samples measurably wait in.
  if (w.read_share >= 0.5 || reader_.busy >= 0.8) return v1::DIAGNOSIS_READ_BOUND;
  if (decode_busy >= 0.5) return v1::DIAGNOSIS_DECODE_BOUND;
  return v1::DIAGNOSIS_LATENCY_BOUND;
}

LoadMonitor::SessionView LoadMonitor::Session(uint64_t id) const {
  auto it = windows_.find(id);
  return it == windows_.end() ? SessionView{} : it->second.view;
}

std::optional<LoadMonitor::Decision> LoadMonitor::Autotune(
    const std::vector<int>& decode_threads, const std::vector<int>& max_decode,
    int reader_threads) {
  // Decide every few ticks, and let a change show in the windows first.
  if (++ticks_since_tune_ < options_.ticks_per_tune || windows_.empty()) {
    return std::nullopt;
  }
  const int nodes = static_cast<int>(std::min(decode_threads.size(), max_decode.size()));
  std::vector<bool> decode_bound(nodes, false), all_consumer(nodes, true), any(nodes, false);
  bool read_bound = false;
  for (const auto& [id, w] : windows_) {
    const v1::Diagnosis d = w.view.diagnosis;
    const int n = w.last.node;
    read_bound |= d == v1::DIAGNOSIS_READ_BOUND;
    if (n < 0 || n >= nodes) continue;
    any[n] = true;
    decode_bound[n] = decode_bound[n] || d == v1::DIAGNOSIS_DECODE_BOUND ||
                      d == v1::DIAGNOSIS_STARVED_BY_FAIR_SHARE;
    all_consumer[n] = all_consumer[n] && d == v1::DIAGNOSIS_CONSUMER_BOUND;
  }
  std::optional<Decision> d;
  for (int n = 0; n < nodes && !d; ++n) {
    if (decode_bound[n] && decode_busy(n) >= 0.8 && decode_threads[n] < max_decode[n]) {
      d = Decision{"decode", n, decode_threads[n] + 1, "a session is decode-bound"};
    }
  }
  for (int n = 0; n < nodes && !d; ++n) {
    if (any[n] && all_consumer[n] && decode_threads[n] > 1 && decode_busy(n) < 0.6) {
      d = Decision{"decode", n, decode_threads[n] - 1, "every session is consumer-bound"};
    }
  }
  if (d) {
    // Named by node only where there are several.
    if (nodes > 1) d->why += " on node " + std::to_string(d->node);
  } else if (read_bound && reader_threads < options_.max_reader_threads) {
    d = Decision{"reader", -1, std::min(options_.max_reader_threads, reader_threads * 2),
                 "a session is read-bound"};
  } else if (!read_bound && reader_threads > options_.min_reader_threads &&
             reader_.busy < 0.2) {
    d = Decision{"reader", -1, std::max(options_.min_reader_threads, reader_threads / 2),
                 "readers idle"};
  }
  if (d) ticks_since_tune_ = 0;
  return d;
}

std::vector<double> LoadMonitor::FairThreads(const std::vector<int>& node_threads,
                                             const std::vector<Share>& sessions) const {
  // Per (node, user): the producing sessions' weights; per node: the users.
  std::map<std::pair<int, int64_t>, int> weights;
  std::vector<int> users(node_threads.size(), 0);
  std::vector<bool> producing;
  for (const Share& s : sessions) {
    producing.push_back(Session(s.id).samples_per_second > 0);
    if (!producing.back()) continue;
    int& w = weights[{s.node, s.user}];
    if (w == 0) ++users[s.node];
    w += s.weight;
  }
  std::vector<double> out;
  for (size_t k = 0; k < sessions.size(); ++k) {
    const Share& s = sessions[k];
    auto it = weights.find({s.node, s.user});
    const int mine = it == weights.end() ? 0 : it->second;
    const int user_count = users[s.node] + (mine == 0 ? 1 : 0);
    const int weight_sum = mine + (producing[k] ? 0 : s.weight);
    out.push_back(double(node_threads[s.node]) / user_count * s.weight / weight_sum);
  }
  return out;
}

}  // namespace stoker
