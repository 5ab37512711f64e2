// Daemon's control loop: the per-session windows and diagnoses the reaper
// updates every tick, autotune, pool resizing and session listing (see
// daemon.h for the contract). Split from daemon.cc, which owns sessions.
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

namespace {
constexpr double kAlpha = 0.3;  // EWMA weight of the newest tick.
double Ewma(double old, double sample) { return old + kAlpha * (sample - old); }
}  // namespace

void Daemon::UpdateWindows(double dt) {
  if (dt <= 0) return;
  for (auto [pool, w] : {std::pair{decode_pool_.get(), &decode_window_},
                         std::pair{reader_pool_.get(), &reader_window_}}) {
    const uint64_t busy = pool->busy_ns();
    w->busy_fraction = Ewma(w->busy_fraction,
                            std::min(1.0, (busy - w->busy_ns) * 1e-9 /
                                              (dt * pool->size())));
    w->busy_ns = busy;
  }
  uint64_t total = 0;
  std::vector<std::pair<Entry*, uint64_t>> decoded;
  for (auto& [id, e] : sessions_) {
    const uint64_t d = e.session->samples_decoded();
    decoded.emplace_back(&e, d - e.window.decoded);
    total += d - e.window.decoded;
    e.window.decoded = d;
  }
  for (auto& [e, delta] : decoded) {
    Window& w = e->window;
    const shm::RingHeader& h = e->session->ring().header();
    const uint64_t wait = h.consumer_wait_ns.load(std::memory_order_relaxed);
    const double fill = static_cast<double>(e->session->ring().FilledSlots()) /
                        e->session->ring().layout().slot_count;
    w.fill = w.ticks == 0 ? fill : Ewma(w.fill, fill);
    w.wait_fraction = Ewma(w.wait_fraction, std::min(1.0, (wait - w.wait_ns) * 1e-9 / dt));
    w.images_per_second = Ewma(w.images_per_second, delta / dt);
    w.share = Ewma(w.share, total ? static_cast<double>(delta) / total : 1.0);
    w.wait_ns = wait;
    if (++w.ticks >= 4) {
      w.diagnosis = Diagnose(w.fill, w.wait_fraction, decode_window_.busy_fraction,
                             w.share, static_cast<int>(sessions_.size()));
    }
  }
}

void Daemon::Autotune() {
  // Decide once a second, and let a change show in the windows first.
  if (++ticks_since_tune_ < 4) return;
  bool decode_bound = false, read_bound = false, all_consumer = true;
  for (const auto& [id, e] : sessions_) {
    decode_bound |= e.window.diagnosis == "decode-bound" ||
                    e.window.diagnosis == "starved-by-fair-share";
    read_bound |= e.window.diagnosis == "read-bound";
    all_consumer &= e.window.diagnosis == "consumer-bound";
  }
  auto change = [&](ThreadPool* pool, int to, const char* why) {
    const int from = pool->size();
    if (to == from) return;
    pool->Resize(to);
    ++autotune_changes_;
    ticks_since_tune_ = 0;
    LogInfo(absl::StrCat("autotune: ", pool->name(), " pool ", from, " -> ", to,
                         " threads (", why, ")"));
  };
  const int decode = decode_pool_->size(), reader = reader_pool_->size();
  if (decode_bound && decode < options_.max_decode_threads) {
    change(decode_pool_.get(), decode + 1, "a session is decode-bound");
  } else if (all_consumer && decode > 1 && decode_window_.busy_fraction < 0.6) {
    change(decode_pool_.get(), decode - 1, "every session is consumer-bound");
  } else if (read_bound && reader < options_.max_reader_threads) {
    change(reader_pool_.get(), std::min(options_.max_reader_threads, reader * 2),
           "a session is read-bound");
  } else if (!read_bound && reader > options_.reader_threads &&
             reader_window_.busy_fraction < 0.2) {
    change(reader_pool_.get(), std::max(options_.reader_threads, reader / 2),
           "readers idle");
  }
}

v1::SessionStats Daemon::EntryStats(const Entry& e) const {
  v1::SessionStats s = e.session->Stats();
  const shm::RingHeader& h = e.session->ring().header();
  s.set_client_wait_seconds(h.consumer_wait_ns.load(std::memory_order_relaxed) * 1e-9);
  s.set_batches_delivered(h.consumer_batches.load(std::memory_order_relaxed));
  s.set_diagnosis(e.window.diagnosis);
  s.set_images_per_second(e.window.images_per_second);
  s.set_ring_fill(e.window.fill);
  s.set_client_wait_fraction(e.window.wait_fraction);
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
