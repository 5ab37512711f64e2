#include "server/daemon/controller.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/pool/topology.h"
#include "util/log.h"

namespace stoker {

Controller::Controller(const DaemonOptions& options)
    : options_(options), monitor_([&] {
        LoadMonitor::Options o;
        o.min_reader_threads = options.reader_threads;
        o.max_reader_threads = options.max_reader_threads;
        return o;
      }()) {}

void Controller::Tick(uint64_t now_ns, const std::vector<Member>& sessions,
                      NodePools& decode_pools, ThreadPool& reader) {
  std::vector<LoadMonitor::SessionReport> reports;
  for (const Member& m : sessions) {
    const ServingSession& s = *m.session;
    LoadMonitor::SessionReport r;
    r.id = m.id;
    r.samples = s.samples_decoded();
    r.client_wait_ns = s.ring().ConsumerWaitNs();
    r.read_ns = s.read_ns();
    r.work_ns = s.work_ns();
    r.ring_fill = static_cast<double>(s.ring().FilledSlots()) / s.ring().layout().slot_count;
    r.node = m.node;
    reports.push_back(r);
  }
  std::vector<LoadMonitor::PoolReport> decode;
  std::vector<int> threads;
  for (int n = 0; n < decode_pools.size(); ++n) {
    const ThreadPool& p = decode_pools.pool(n);
    decode.push_back({p.size(), p.busy_ns()});
    threads.push_back(p.size());
  }
  monitor_.Tick(now_ns, decode, {reader.size(), reader.busy_ns()}, reports);
  std::vector<LoadMonitor::Share> shares;
  for (const Member& m : sessions) {
    shares.push_back({m.id, m.node, m.session->Weight(), m.owner_uid});
  }
  const std::vector<double> fair = monitor_.FairThreads(threads, shares);
  for (size_t k = 0; k < sessions.size(); ++k) sessions[k].session->SetDecodeThreads(fair[k]);
  if (!options_.autotune) return;
  const int max_total = options_.max_decode_threads > 0
                            ? options_.max_decode_threads
                            : decode_pools.topology().total_cpus();
  std::optional<LoadMonitor::Decision> d =
      monitor_.Autotune(threads, decode_pools.Split(max_total), reader.size());
  if (!d) return;
  ThreadPool* pool = d->pool == "decode" ? &decode_pools.pool(d->node) : &reader;
  const int from = pool->size();
  pool->Resize(d->threads);
  ++autotune_changes_;
  LogInfo(absl::StrCat("autotune: ", pool->name(), " pool ", from, " -> ",
                       d->threads, " threads (", d->why, ")"));
}

absl::StatusOr<v1::ResizePoolResponse> Controller::Resize(
    const v1::ResizePoolRequest& request, NodePools& decode_pools, ThreadPool& reader) {
  if (request.threads() < 1 || request.threads() > 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "threads ", request.threads(), " must be in 1..1024"));
  }
  if (request.pool() != "decode" && request.pool() != "reader") {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown pool '", request.pool(), "': use decode or reader"));
  }
  const bool decode = request.pool() == "decode";
  if (request.has_node() &&
      (!decode || request.node() < 0 || request.node() >= decode_pools.size())) {
    return absl::InvalidArgumentError(
        decode ? absl::StrCat("node ", request.node(), " is not a node of this daemon (0..",
                              decode_pools.size() - 1, ")")
               : std::string("the reader pool has no nodes"));
  }
  const int threads = static_cast<int>(request.threads());
  if (decode && !request.has_node() && threads < decode_pools.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "threads ", threads, " must be at least one per node (",
        decode_pools.size(), ")"));
  }
  v1::ResizePoolResponse resp;
  std::string what = request.pool();
  if (!decode) {
    resp.set_previous_threads(reader.size());
    reader.Resize(threads);
    resp.set_threads(reader.size());
  } else if (request.has_node()) {
    ThreadPool& pool = decode_pools.pool(request.node());
    resp.set_previous_threads(pool.size());
    pool.Resize(threads);
    resp.set_threads(pool.size());
    absl::StrAppend(&what, " (node ", request.node(), ")");
  } else {
    resp.set_previous_threads(decode_pools.threads());
    decode_pools.Resize(threads);
    resp.set_threads(decode_pools.threads());
  }
  LogInfo(absl::StrCat(what, " pool resized from ", resp.previous_threads(), " to ",
                       resp.threads(), " threads"));
  return resp;
}

void Controller::AddSessionView(v1::SessionStats* s) const {
  const LoadMonitor::SessionView w = monitor_.Session(s->session_id());
  s->set_diagnosis(w.diagnosis);
  s->set_images_per_second(w.samples_per_second);
  s->set_ring_fill(w.ring_fill);
  s->set_client_wait_fraction(w.wait_fraction);
}

void Controller::AddPoolStats(v1::DaemonStats* s, const NodePools* decode,
                              const ThreadPool* reader) const {
  s->set_autotune_changes(autotune_changes_);
  auto add_pool = [s](const char* name, const ThreadPool& pool, double busy) {
    v1::PoolStats* p = s->add_pools();
    p->set_pool(name);
    p->set_threads(pool.size());
    p->set_busy_seconds(pool.busy_ns() * 1e-9);
    p->set_busy_fraction(busy);
    p->set_queued(pool.queued());
    return p;
  };
  for (int n = 0; decode != nullptr && n < decode->size(); ++n) {
    v1::PoolStats* p = add_pool("decode", decode->pool(n), monitor_.decode_busy(n));
    p->set_node(n);
    if (decode->pinned()) p->set_cpus(FormatCpuList(decode->topology().nodes()[n].cpus));
    p->set_spilled_in(decode->spilled_in(n));
  }
  if (reader != nullptr) add_pool("reader", *reader, monitor_.reader_busy());
}

}  // namespace stoker
