// The Prometheus adapter: serves /metrics (prometheus-cpp's civetweb
// exposer) with families built at scrape time from Daemon::GetStats(), so
// the core keeps no Prometheus types and every figure has one source.
//
// Names follow Prometheus conventions: stoker_ prefix, base units,
// _total for counters, _seconds and _bytes. Session series carry a
// `session` label only while the session is open (they vanish from the
// next scrape once it closes). Thread-safe; stop (destroy) it before the
// Daemon.
#ifndef STOKER_SERVER_DAEMON_METRICS_H_
#define STOKER_SERVER_DAEMON_METRICS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "server/daemon/daemon.h"

namespace prometheus {
class Exposer;
}

namespace stoker {

// Builds the metric families for one stats snapshot.
std::vector<prometheus::MetricFamily> MetricFamilies(const v1::DaemonStats& s);

class MetricsServer {
 public:
  // Listens on `address` ("127.0.0.1:9464"; port 0 picks a free one).
  // UNAVAILABLE with the reason when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      Daemon* daemon, const std::string& address);
  ~MetricsServer();

  int port() const { return port_; }

 private:
  class Collector;
  MetricsServer() = default;

  std::shared_ptr<Collector> collector_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace stoker

#endif  // STOKER_SERVER_DAEMON_METRICS_H_
