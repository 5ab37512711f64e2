// A loopback HTTP/1.1 proxy that stands in front of an object store and
// makes it look remote and unreliable: each request waits `latency`, and a
// seeded share of them is answered 503 SlowDown or has its connection
// reset instead of being forwarded. For tests and benchmarks of the S3
// client against a local server (moto, MinIO).
//
// Each request is forwarded unchanged (its Host header too, so a SigV4
// signature made for the proxy's address verifies upstream); the reply is
// passed back whole. Connections are kept as a network path keeps them:
// each client connection has one upstream connection for as long as both
// sides keep theirs (a reply without a length, or with Connection: close,
// ends both). Requests are served concurrently, a thread per client
// connection.
//
// Thread-safe; Stop (or destruction) closes the listener and every
// connection and joins the threads.
#ifndef STOKER_SERVER_OBJSTORE_FAULT_PROXY_H_
#define STOKER_SERVER_OBJSTORE_FAULT_PROXY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace stoker {

class FaultProxy {
 public:
  struct Options {
    std::string upstream_host = "127.0.0.1";
    uint16_t upstream_port = 0;
    absl::Duration latency;       // Before each request is answered.
    double slow_down_share = 0;   // Answered 503 SlowDown.
    double reset_share = 0;       // Connection reset, nothing answered.
    // The first `fail_first` requests get 503 (then the shares apply).
    int fail_first = 0;
    uint64_t seed = 1;
  };

  struct Counts {
    uint64_t requests = 0, forwarded = 0, slow_downs = 0, resets = 0;
  };

  // Listens on 127.0.0.1 at a free port.
  static absl::StatusOr<std::unique_ptr<FaultProxy>> Start(Options options);
  ~FaultProxy();
  void Stop();

  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  Counts counts() const;

 private:
  FaultProxy(Options options, int listener, uint16_t port);
  void Accept();
  void Serve(int client);
  // What to do with the next request: 0 forward, 1 slow down, 2 reset.
  int Decide();
  // A new upstream connection; -1 if none could be made (or stopping).
  int Connect();
  // Closes an upstream connection from Connect.
  void Disconnect(int up);

  const Options options_;
  const int listener_;
  const uint16_t port_;
  std::thread acceptor_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int> clients_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> servers_ ABSL_GUARDED_BY(mu_);
  // Server threads about to end (joined by Accept or Stop).
  std::vector<std::thread::id> ended_ ABSL_GUARDED_BY(mu_);
  uint64_t drawn_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> requests_{0}, forwarded_{0}, slow_downs_{0}, resets_{0};
};

}  // namespace stoker

#endif  // STOKER_SERVER_OBJSTORE_FAULT_PROXY_H_
