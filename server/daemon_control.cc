// Daemon's control loop: each reaper tick reports the sessions' and pools'
// counters to the LoadMonitor (windows, diagnoses, autotune decisions) and
// carries out its decision; pool resizing and session listing (see daemon.h
// for the contract). Split from daemon.cc, which owns sessions.
#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/daemon.h"
#include "util/log.h"
#include "util/status_macros.h"

namespace stoker {

int Daemon::decode_threads() const { return decode_pool_->size(); }

void Daemon::ControlTick(uint64_t now_ns) {
  std::vector<LoadMonitor::SessionReport> reports;
  for (const auto& [id, e] : sessions_) {
    LoadMonitor::SessionReport r;
    r.id = id;
    r.samples = e.session->samples_decoded();
    r.client_wait_ns =
        e.session->ring().header().consumer_wait_ns.load(std::memory_order_relaxed);
    r.read_ns = e.session->read_ns();
    r.work_ns = e.session->work_ns();
    r.ring_fill = static_cast<double>(e.session->ring().FilledSlots()) /
                  e.session->ring().layout().slot_count;
    reports.push_back(r);
  }
  monitor_.Tick(now_ns, {decode_pool_->size(), decode_pool_->busy_ns()},
                {reader_pool_->size(), reader_pool_->busy_ns()}, reports);
  if (!options_.autotune) return;
  std::optional<LoadMonitor::Decision> d =
      monitor_.Autotune(decode_pool_->size(), reader_pool_->size());
  if (!d) return;
  ThreadPool* pool = Pool(d->pool);
  const int from = pool->size();
  pool->Resize(d->threads);
  ++autotune_changes_;
  LogInfo(absl::StrCat("autotune: ", pool->name(), " pool ", from, " -> ",
                       d->threads, " threads (", d->why, ")"));
}

v1::SessionStats Daemon::EntryStats(const Entry& e) const {
  v1::SessionStats s = e.session->Stats();
  const shm::RingHeader& h = e.session->ring().header();
  s.set_client_wait_seconds(h.consumer_wait_ns.load(std::memory_order_relaxed) * 1e-9);
  s.set_batches_delivered(h.consumer_batches.load(std::memory_order_relaxed));
  const LoadMonitor::SessionView w = monitor_.Session(s.session_id());
  s.set_diagnosis(w.diagnosis);
  s.set_images_per_second(w.samples_per_second);
  s.set_ring_fill(w.ring_fill);
  s.set_client_wait_fraction(w.wait_fraction);
  s.set_client_uid(e.owner_uid);
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

ThreadPool* Daemon::Pool(const std::string& name) {
  if (name == "decode") return decode_pool_.get();
  if (name == "reader") return reader_pool_.get();
  return nullptr;
}

absl::StatusOr<v1::ResizePoolResponse> Daemon::ResizePool(
    const v1::ResizePoolRequest& request, const Caller& caller) {
  STOKER_RETURN_IF_ERROR(RequireAdmin(caller, "resizing pools"));
  if (request.threads() < 1 || request.threads() > 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "threads ", request.threads(), " must be in 1..1024"));
  }
  absl::MutexLock lock(&mu_);
  if (!serving_ || stopping_) return absl::UnavailableError("the daemon is not serving");
  ThreadPool* pool = Pool(request.pool());
  if (pool == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown pool '", request.pool(), "': use decode or reader"));
  }
  v1::ResizePoolResponse resp;
  resp.set_previous_threads(pool->size());
  pool->Resize(static_cast<int>(request.threads()));
  resp.set_threads(pool->size());
  LogInfo(absl::StrCat(request.pool(), " pool resized from ",
                       resp.previous_threads(), " to ", resp.threads(),
                       " threads"));
  return resp;
}

}  // namespace stoker
