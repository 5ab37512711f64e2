#include "server/load_monitor.h"

#include <algorithm>


namespace stoker {

void LoadMonitor::Tick(uint64_t now_ns, const PoolReport& decode,
                       const PoolReport& reader,
                       const std::vector<SessionReport>& sessions) {
  const double dt = started_ ? (now_ns - last_ns_) * 1e-9 : 0;
  last_ns_ = now_ns;
  if (!started_) {  // The first tick only sets the baselines.
    started_ = true;
    decode_.busy_ns = decode.busy_ns;
    reader_.busy_ns = reader.busy_ns;
    for (const SessionReport& r : sessions) windows_[r.id].last = r;
    return;
  }
  if (dt <= 0) return;
  for (auto [pool, report] : {std::pair{&decode_, &decode}, std::pair{&reader_, &reader}}) {
    const double busy = (report->busy_ns - pool->busy_ns) * 1e-9 /
                        (dt * std::max(1, report->threads));
    pool->busy = Ewma(pool->busy, std::min(1.0, busy));
    pool->busy_ns = report->busy_ns;
  }
  uint64_t total = 0;
  absl::flat_hash_map<uint64_t, Window> next;
  for (const SessionReport& r : sessions) {
    auto it = windows_.find(r.id);
    Window w = it == windows_.end() ? Window{r, {}, 0} : it->second;
    total += r.samples - w.last.samples;
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
    v.share = Ewma(v.share, total ? static_cast<double>(samples) / total : 1.0);
    if (read + work > 0) {
      v.read_share = Ewma(v.read_share, static_cast<double>(read) / (read + work));
    }
    w.last = r;
    if (++w.ticks >= options_.warmup_ticks) {
      v.diagnosis = Diagnose(v, static_cast<int>(sessions.size()));
    }
  }
  windows_ = std::move(next);
}

v1::Diagnosis LoadMonitor::Diagnose(const SessionView& w, int sessions) const {
  if (w.ring_fill >= 0.75) return v1::DIAGNOSIS_CONSUMER_BOUND;
  if (decode_.busy >= 0.8) {
    return sessions > 1 && w.share < 0.8 / sessions
               ? v1::DIAGNOSIS_STARVED_BY_FAIR_SHARE
               : v1::DIAGNOSIS_DECODE_BOUND;
  }
  if (w.wait_fraction < 0.05) return v1::DIAGNOSIS_BALANCED;
  // The client waits: name the stage its samples measurably wait in.
  if (w.read_share >= 0.5 || reader_.busy >= 0.8) return v1::DIAGNOSIS_READ_BOUND;
  if (decode_.busy >= 0.5) return v1::DIAGNOSIS_DECODE_BOUND;
  return v1::DIAGNOSIS_LATENCY_BOUND;
}

LoadMonitor::SessionView LoadMonitor::Session(uint64_t id) const {
  auto it = windows_.find(id);
  return it == windows_.end() ? SessionView{} : it->second.view;
}

std::optional<LoadMonitor::Decision> LoadMonitor::Autotune(int decode_threads,
                                                           int reader_threads) {
  // Decide every few ticks, and let a change show in the windows first.
  if (++ticks_since_tune_ < options_.ticks_per_tune || windows_.empty()) {
    return std::nullopt;
  }
  bool decode_bound = false, read_bound = false, all_consumer = true;
  for (const auto& [id, w] : windows_) {
    const v1::Diagnosis d = w.view.diagnosis;
    decode_bound |= d == v1::DIAGNOSIS_DECODE_BOUND ||
                    d == v1::DIAGNOSIS_STARVED_BY_FAIR_SHARE;
    read_bound |= d == v1::DIAGNOSIS_READ_BOUND;
    all_consumer &= d == v1::DIAGNOSIS_CONSUMER_BOUND;
  }
  std::optional<Decision> d;
  if (decode_bound && decode_.busy >= 0.8 && decode_threads < options_.max_decode_threads) {
    d = Decision{"decode", decode_threads + 1, "a session is decode-bound"};
  } else if (all_consumer && decode_threads > 1 && decode_.busy < 0.6) {
    d = Decision{"decode", decode_threads - 1, "every session is consumer-bound"};
  } else if (read_bound && reader_threads < options_.max_reader_threads) {
    d = Decision{"reader", std::min(options_.max_reader_threads, reader_threads * 2),
                 "a session is read-bound"};
  } else if (!read_bound && reader_threads > options_.min_reader_threads &&
             reader_.busy < 0.2) {
    d = Decision{"reader", std::max(options_.min_reader_threads, reader_threads / 2),
                 "readers idle"};
  }
  if (d) ticks_since_tune_ = 0;
  return d;
}

}  // namespace stoker
