#include "server/daemon/metrics.h"

#include <exception>
#include <limits>

#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"
#include "server/pool/load_monitor.h"

namespace stoker {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

using Labels = std::vector<ClientMetric::Label>;

MetricFamily Family(const std::string& name, const std::string& help,
                    MetricType type) {
  MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  return f;
}

void Add(MetricFamily& f, double value, Labels labels = {}) {
  ClientMetric m;
  m.label = std::move(labels);
  if (f.type == MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
}

MetricFamily HistogramFamily(const std::string& name, const std::string& help,
                             const v1::Histogram& h) {
  MetricFamily f = Family(name, help, MetricType::Histogram);
  ClientMetric m;
  m.histogram.sample_count = h.count();
  m.histogram.sample_sum = h.sum();
  for (int i = 0; i < h.cumulative_counts_size(); ++i) {
    ClientMetric::Bucket b;
    b.cumulative_count = h.cumulative_counts(i);
    b.upper_bound = i < h.upper_bounds_size() ? h.upper_bounds(i)
                                              : std::numeric_limits<double>::infinity();
    m.histogram.bucket.push_back(b);
  }
  f.metric.push_back(std::move(m));
  return f;
}

}  // namespace

std::vector<MetricFamily> MetricFamilies(const v1::DaemonStats& s) {
  std::vector<MetricFamily> out;
  auto counter = [&](const char* name, const char* help, double v) {
    out.push_back(Family(name, help, MetricType::Counter));
    Add(out.back(), v);
  };
  auto gauge = [&](const char* name, const char* help, double v) {
    out.push_back(Family(name, help, MetricType::Gauge));
    Add(out.back(), v);
  };
  gauge("stoker_up", "1 while the daemon serves.", 1);
  gauge("stoker_uptime_seconds", "Seconds since the daemon started.", s.uptime_seconds());
  counter("stoker_samples_decoded_total", "Samples delivered decoded.", s.samples_decoded());
  out.push_back(Family("stoker_samples_failed_total",
                       "Samples delivered as failed (zero pixels), by reason.",
                       MetricType::Counter));
  Add(out.back(), s.samples_failed_read(), {{"reason", "read"}});
  Add(out.back(), s.samples_failed_decode(), {{"reason", "decode"}});
  counter("stoker_read_bytes_total", "Bytes read from dataset storage.",
          s.reader().source_bytes());
  counter("stoker_source_reads_total", "Reads that reached dataset storage.",
          s.reader().source_reads());
  counter("stoker_batches_published_total", "Batches written into rings.",
          s.batches_published());
  out.push_back(HistogramFamily("stoker_read_seconds",
                                "Reader stage per sample: caches and storage.",
                                s.read_latency()));
  out.push_back(HistogramFamily("stoker_decode_seconds", "JPEG decode per sample.",
                                s.decode_latency()));
  out.push_back(HistogramFamily("stoker_transform_seconds",
                                "Resample, normalize and write per sample.",
                                s.transform_latency()));
  MetricFamily hits = Family("stoker_cache_hits_total", "Cache hits by tier.",
                             MetricType::Counter);
  MetricFamily misses = Family("stoker_cache_misses_total",
                               "Cache misses by tier (stale and corrupt L2 "
                               "entries included).", MetricType::Counter);
  MetricFamily bytes = Family("stoker_cache_bytes", "Bytes held by tier.",
                              MetricType::Gauge);
  MetricFamily evictions = Family("stoker_cache_evictions_total",
                                  "Entries evicted by tier.", MetricType::Counter);
  for (const v1::TierStats& t : s.tiers()) {
    if (!t.enabled()) continue;
    const Labels l = {{"tier", t.tier()}};
    Add(hits, t.hits(), l);
    Add(misses, t.misses() + t.stale() + t.corrupt(), l);
    Add(bytes, t.bytes(), l);
    Add(evictions, t.evictions(), l);
  }
  // L2 series exist (as zeros) without an L2 too, so dashboards need no
  // special case.
  v1::TierStats l2;
  for (const v1::TierStats& t : s.tiers()) {
    if (t.tier() == "l2") l2 = t;
  }
  gauge("stoker_l2_writer_queue_depth", "Writes waiting for the L2 writer.",
        l2.writer_queue_depth());
  counter("stoker_l2_writer_drops_total",
          "L2 writes dropped (queue full or map full).", l2.writer_drops());
  counter("stoker_l2_corrupt_total", "L2 entries that failed their checksum.",
          l2.corrupt());
  for (auto* f : {&hits, &misses, &bytes, &evictions}) out.push_back(std::move(*f));
  // Object store series exist (as zeros) without one too.
  const v1::ObjectStoreStats& o = s.object_store();
  counter("stoker_object_store_requests_total",
          "Object store requests sent (retries included), all sessions.", o.requests());
  counter("stoker_object_store_retries_total", "Object store requests sent again.",
          o.retries());
  counter("stoker_object_store_failures_total", "Object store requests that failed.",
          o.failures());
  counter("stoker_object_store_bytes_total", "Object store reply bytes received.", o.bytes());
  counter("stoker_object_store_throttles_total",
          "Object store 503 SlowDown, 429 and timeouts.", o.throttles());
  gauge("stoker_object_store_in_flight_limit",
        "Object store requests the client keeps in flight now.", o.in_flight_limit());
  MetricFamily threads = Family("stoker_pool_threads", "Worker threads by pool.",
                                MetricType::Gauge);
  MetricFamily busy = Family("stoker_pool_busy_ratio",
                             "Recent share of pool thread time spent in tasks.",
                             MetricType::Gauge);
  MetricFamily busy_total = Family("stoker_pool_busy_seconds_total",
                                   "Thread time spent in tasks by pool.",
                                   MetricType::Counter);
  MetricFamily spilled = Family("stoker_pool_spilled_tasks_total",
                                "Decode tasks a node's pool ran for sessions "
                                "placed on other nodes.",
                                MetricType::Counter);
  for (const v1::PoolStats& p : s.pools()) {
    // Decode pools carry their NUMA node.
    Labels l = {{"pool", p.pool()}};
    if (p.has_node()) l.push_back({"numa_node", absl::StrCat(p.node())});
    Add(threads, p.threads(), l);
    Add(busy, p.busy_fraction(), l);
    Add(busy_total, p.busy_seconds(), l);
    if (p.has_node()) Add(spilled, p.spilled_in(), l);
  }
  for (auto* f : {&threads, &busy, &busy_total, &spilled}) out.push_back(std::move(*f));
  counter("stoker_pixel_cache_decodes_total",
          "Pictures decoded and scaled into the pixel cache (missed in RAM and L2).",
          s.pixel_cache_decodes());
  counter("stoker_volume_cache_decodes_total",
          "Volumes decoded whole into the volume cache (or their last chunk).", s.volume_cache_decodes());
  counter("stoker_volume_cache_chunks_total",
          "Chunks decoded one by one into the volume cache (each once).",
          s.volume_cache_chunks());
  counter("stoker_volume_cache_idle_chunks_total",
          "Chunks filled while trainers were busy with their steps (the rest of a volume).",
          s.volume_cache_idle_chunks());
  counter("stoker_volume_cache_spilled_total",
          "Volumes written to L2 once decoded.", s.volume_cache_spilled());
  counter("stoker_volume_cache_unspilled_total",
          "Volumes found in L2 instead of decoded again.", s.volume_cache_unspilled());
  counter("stoker_volume_cache_oversized_total",
          "Reads of volumes larger than the volume cache (read by region instead).",
          s.volume_cache_oversized());
  counter("stoker_autotune_changes_total", "Pool resizes made by autotune.",
          s.autotune_changes());
  gauge("stoker_sessions", "Open sessions.", s.sessions_size());
  counter("stoker_sessions_opened_total", "Sessions opened.", s.sessions_opened());
  counter("stoker_sessions_reclaimed_total",
          "Sessions closed because their client vanished.", s.sessions_reclaimed());
  MetricFamily ready = Family("stoker_session_ring_ready_slots",
                              "Published, unreleased ring slots per session.",
                              MetricType::Gauge);
  MetricFamily slots = Family("stoker_session_ring_slots", "Ring slots per session.",
                              MetricType::Gauge);
  MetricFamily delivered = Family("stoker_session_batches_delivered_total",
                                  "Batches the client took, per session.",
                                  MetricType::Counter);
  MetricFamily wait = Family("stoker_session_client_wait_seconds_total",
                             "Time the trainer spent blocked waiting for a "
                             "batch, per session (starvation).",
                             MetricType::Counter);
  MetricFamily diagnosis = Family("stoker_session_diagnosis",
                                  "1 for the session's current diagnosis.",
                                  MetricType::Gauge);
  MetricFamily session_spilled = Family(
      "stoker_session_samples_spilled_total",
      "Samples of a session decoded on another node's idle threads.",
      MetricType::Counter);
  MetricFamily client_decoded = Family(
      "stoker_session_samples_client_decoded_total",
      "Samples handed to the client as encoded bytes (client decode).",
      MetricType::Counter);
  MetricFamily cpu_share = Family(
      "stoker_session_cpu_share",
      "Client decode: the share of each batch the daemon decodes.",
      MetricType::Gauge);
  MetricFamily remote_requests = Family(
      "stoker_session_remote_requests_total",
      "Object reads of a dataset in an object store, per session (no retries, no "
      "listings).",
      MetricType::Counter);
  MetricFamily remote_bytes = Family(
      "stoker_session_remote_bytes_total",
      "Bytes of object reads of a dataset in an object store, per session.",
      MetricType::Counter);
  MetricFamily epoch_requests = Family(
      "stoker_session_epoch_remote_requests",
      "Object reads per epoch of a session: epochs_ago 0 is the epoch it began "
      "last (its last 16).",
      MetricType::Gauge);
  MetricFamily epoch_bytes = Family(
      "stoker_session_epoch_remote_bytes",
      "Bytes of object reads per epoch of a session: epochs_ago 0 is the epoch it "
      "began last (its last 16).",
      MetricType::Gauge);
  MetricFamily order_partitions = Family(
      "stoker_session_order_partitions_per_step",
      "Canonical partitions a global step's samples were placed in, in the shuffled "
      "epoch a session last began (at most the step or the partitions).",
      MetricType::Gauge);
  MetricFamily order_spread = Family(
      "stoker_session_order_spread",
      "Mean gap between consecutive samples of the epoch's order over the dataset's "
      "size (1/3 for a uniform permutation).",
      MetricType::Gauge);
  MetricFamily order_over = Family(
      "stoker_session_order_exchange_over_budget",
      "Partitions whose exchange, weighed by listed bytes, went past E mean-sized "
      "samples in the epoch a session last began (0 when it held everywhere).",
      MetricType::Gauge);
  for (const v1::SessionStats& ss : s.sessions()) {
    const Labels l = {{"session", absl::StrCat(ss.session_id())}};
    if (ss.has_order()) {
      Add(order_partitions, ss.order().partitions_per_step(), l);
      Add(order_spread, ss.order().spread(), l);
      if (ss.order().exchange_by_bytes()) {
        Add(order_over, ss.order().exchange_over_budget(), l);
      }
    }
    if (ss.remote_requests() > 0 || ss.remote_by_epoch_size() > 0) {
      Add(remote_requests, ss.remote_requests(), l);
      Add(remote_bytes, ss.remote_bytes(), l);
      // Labelled by how many epochs ago, not by epoch: a bounded set of
      // series per session however many epochs it reads.
      const uint64_t last = ss.remote_by_epoch_size() > 0
                                ? ss.remote_by_epoch(ss.remote_by_epoch_size() - 1).epoch()
                                : 0;
      for (const v1::EpochRemote& e : ss.remote_by_epoch()) {
        const Labels le = {l[0], {"epochs_ago", absl::StrCat(last - e.epoch())}};
        Add(epoch_requests, e.requests(), le);
        Add(epoch_bytes, e.bytes(), le);
      }
    }
    if (ss.has_cpu_share()) {
      Add(client_decoded, ss.samples_client_decoded(), l);
      Add(cpu_share, ss.cpu_share(), l);
    }
    Add(session_spilled, ss.samples_spilled(), {l[0], {"numa_node", absl::StrCat(ss.numa_node())}});
    Add(ready, ss.ring_ready(), l);
    Add(slots, ss.ring_slots(), l);
    Add(delivered, ss.batches_delivered(), l);
    Add(wait, ss.client_wait_seconds(), l);
    Add(diagnosis, 1, {{"diagnosis", DiagnosisName(ss.diagnosis())}, l[0]});
  }
  for (auto* f : {&ready, &slots, &delivered, &wait, &diagnosis, &session_spilled,
                  &client_decoded, &cpu_share, &remote_requests, &remote_bytes, &epoch_requests,
                  &epoch_bytes, &order_partitions, &order_spread, &order_over}) {
    out.push_back(std::move(*f));
  }
  return out;
}

class MetricsServer::Collector : public prometheus::Collectable {
 public:
  explicit Collector(Daemon* daemon) : daemon_(daemon) {}
  std::vector<MetricFamily> Collect() const override {
    return MetricFamilies(daemon_->GetStats());
  }

 private:
  Daemon* const daemon_;
};

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    Daemon* daemon, const std::string& address) {
  std::unique_ptr<MetricsServer> m(new MetricsServer);
  try {
    m->exposer_ = std::make_unique<prometheus::Exposer>(address, 1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve /metrics on ", address, ": ", e.what()));
  }
  m->collector_ = std::make_shared<Collector>(daemon);
  m->exposer_->RegisterCollectable(m->collector_);
  const std::vector<int> ports = m->exposer_->GetListeningPorts();
  m->port_ = ports.empty() ? 0 : ports[0];
  daemon->SetMetricsPort(m->port_);
  return m;
}

MetricsServer::~MetricsServer() = default;

}  // namespace stoker
