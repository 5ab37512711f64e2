// Daemon's control loop: each reaper tick reports the sessions' and pools'
// counters to the LoadMonitor (windows, diagnoses, autotune decisions) and
// carries out its decision; pool resizing and session listing (see daemon.h
// for the contract). Split from daemon.cc, which owns sessions.
#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/daemon/daemon.h"
#include "util/log.h"
#include "util/status_macros.h"

namespace stoker {

int Daemon::decode_threads() const { return decode_pools_->threads(); }

void Daemon::ControlTick(uint64_t now_ns) {
  std::vector<LoadMonitor::SessionReport> reports;
  for (const auto& [id, e] : sessions_) {
    LoadMonitor::SessionReport r;
    r.id = id;
    r.samples = e.session->samples_decoded();
    r.client_wait_ns = e.session->ring().ConsumerWaitNs();
    r.read_ns = e.session->read_ns();
    r.work_ns = e.session->work_ns();
    r.ring_fill = static_cast<double>(e.session->ring().FilledSlots()) /
                  e.session->ring().layout().slot_count;
    r.node = e.node;
    reports.push_back(r);
  }
  std::vector<LoadMonitor::PoolReport> decode;
  std::vector<int> threads;
  for (int n = 0; n < decode_pools_->size(); ++n) {
    const ThreadPool& p = decode_pools_->pool(n);
    decode.push_back({p.size(), p.busy_ns()});
    threads.push_back(p.size());
  }
  monitor_.Tick(now_ns, decode, {reader_pool_->size(), reader_pool_->busy_ns()}, reports);
  std::vector<LoadMonitor::Share> shares;
  std::vector<ServingSession*> order;
  for (const auto& [id, e] : sessions_) {
    shares.push_back({id, e.node, e.session->Weight(), e.owner_uid});
    order.push_back(e.session.get());
  }
  const std::vector<double> fair = monitor_.FairThreads(threads, shares);
  for (size_t k = 0; k < order.size(); ++k) order[k]->SetDecodeThreads(fair[k]);
  if (!options_.autotune) return;
  const int max_total = options_.max_decode_threads > 0
                            ? options_.max_decode_threads
                            : decode_pools_->topology().total_cpus();
  std::optional<LoadMonitor::Decision> d =
      monitor_.Autotune(threads, decode_pools_->Split(max_total), reader_pool_->size());
  if (!d) return;
  ThreadPool* pool =
      d->pool == "decode" ? &decode_pools_->pool(d->node) : reader_pool_.get();
  const int from = pool->size();
  pool->Resize(d->threads);
  ++autotune_changes_;
  LogInfo(absl::StrCat("autotune: ", pool->name(), " pool ", from, " -> ",
                       d->threads, " threads (", d->why, ")"));
}

v1::SessionStats Daemon::EntryStats(const Entry& e) const {
  v1::SessionStats s = e.session->Stats();
  s.set_client_wait_seconds(e.session->ring().ConsumerWaitNs() * 1e-9);
  s.set_batches_delivered(e.session->ring().ConsumerBatches());
  const LoadMonitor::SessionView w = monitor_.Session(s.session_id());
  s.set_diagnosis(w.diagnosis);
  s.set_images_per_second(w.samples_per_second);
  s.set_ring_fill(w.ring_fill);
  s.set_client_wait_fraction(w.wait_fraction);
  s.set_client_uid(e.owner_uid);
  s.set_placement(e.placement);
  return s;
}

std::vector<v1::SessionStats> Daemon::ListSessions(const Caller& caller) const {
  std::vector<v1::SessionStats> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, e] : sessions_) out.push_back(VisibleStats(e, caller));
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.session_id() < b.session_id();
  });
  return out;
}

absl::StatusOr<v1::ResizePoolResponse> Daemon::ResizePool(
    const v1::ResizePoolRequest& request, const Caller& caller) {
  STOKER_RETURN_IF_ERROR(Authorizer::RequireAdmin(caller, "resizing pools"));
  if (request.threads() < 1 || request.threads() > 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "threads ", request.threads(), " must be in 1..1024"));
  }
  absl::MutexLock lock(&mu_);
  if (!serving_ || stopping_) return absl::UnavailableError("the daemon is not serving");
  if (request.pool() != "decode" && request.pool() != "reader") {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown pool '", request.pool(), "': use decode or reader"));
  }
  const bool decode = request.pool() == "decode";
  if (request.has_node() &&
      (!decode || request.node() < 0 || request.node() >= decode_pools_->size())) {
    return absl::InvalidArgumentError(
        decode ? absl::StrCat("node ", request.node(), " is not a node of this daemon (0..",
                              decode_pools_->size() - 1, ")")
               : std::string("the reader pool has no nodes"));
  }
  const int threads = static_cast<int>(request.threads());
  if (decode && !request.has_node() && threads < decode_pools_->size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "threads ", threads, " must be at least one per node (",
        decode_pools_->size(), ")"));
  }
  v1::ResizePoolResponse resp;
  std::string what = request.pool();
  if (!decode) {
    resp.set_previous_threads(reader_pool_->size());
    reader_pool_->Resize(threads);
    resp.set_threads(reader_pool_->size());
  } else if (request.has_node()) {
    ThreadPool& pool = decode_pools_->pool(request.node());
    resp.set_previous_threads(pool.size());
    pool.Resize(threads);
    resp.set_threads(pool.size());
    absl::StrAppend(&what, " (node ", request.node(), ")");
  } else {
    resp.set_previous_threads(decode_pools_->threads());
    decode_pools_->Resize(threads);
    resp.set_threads(decode_pools_->threads());
  }
  LogInfo(absl::StrCat(what, " pool resized from ", resp.previous_threads(), " to ",
                       resp.threads(), " threads"));
  return resp;
}

}  // namespace stoker
