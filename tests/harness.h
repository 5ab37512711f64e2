// Test harness: a Stoker daemon serving on a private Unix socket with a
// private ring-name prefix, either in-process (Daemon + GrpcServer, with any
// DaemonOptions, e.g. an injected FileSystem) or as the real stokerd binary
// in a subprocess. The destructor stops it and checks that this process
// holds no ring any more (and, for the subprocess, that it exited 0 and
// removed its socket). Plus process helpers. For tests only; not
// thread-safe.
#ifndef STOKER_TESTS_HARNESS_H_
#define STOKER_TESTS_HARNESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "client/cpp/client.h"
#include "server/daemon/daemon.h"
#include "server/daemon/grpc_service.h"
#include "server/daemon/ring_handoff.h"

namespace stoker::testing {

// The cache tier `name` ("l1", "l2", "decoded", "pixels", "volumes") of `stats`; an
// empty one (enabled = false, every count 0) when there is none.
const v1::TierStats& TierOf(const v1::DaemonStats& stats, const std::string& name);

// Starts args[0] (a path) with args; returns its pid.
pid_t Spawn(const std::vector<std::string>& args);
// Waits for `pid`; its exit code, or 128 + the signal that killed it.
int WaitExit(pid_t pid);

class TestDaemon {
 public:
  // `options.shm_prefix` is replaced by a private one. For a subprocess
  // only decode_threads is used, passed as --threads. It serves in `dir`
  // (made if missing; removed when it stops), else in a folder of its own.
  TestDaemon(bool subprocess, DaemonOptions options, const std::string& dir = "");
  TestDaemon(bool subprocess, int threads);
  ~TestDaemon();

  std::unique_ptr<Client> Connect();
  Daemon* daemon() { return daemon_.get(); }  // Null for a subprocess.
  const std::string& socket() const { return socket_; }
  const std::string& prefix() const { return prefix_; }
  // The daemon's process for Segment::List: 0 (this one) when in-process.
  pid_t pid() const { return subprocess_ ? pid_ : 0; }

 private:
  bool subprocess_;
  std::string dir_, socket_, prefix_;
  pid_t pid_ = -1;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<RingHandoffServer> handoff_;
};

}  // namespace stoker::testing

#endif  // STOKER_TESTS_HARNESS_H_
