// The ring handoff: a small Unix-socket server that gives each session's
// client its ring as a file descriptor (SCM_RIGHTS; protocol in
// shm/fd_passing.h), and gives each client the caller token of its uid
// (SO_PEERCRED), which the control channel then requires. Segments stay 0600 and owned by the daemon's user, so
// no other user can open a ring by name, while a trainer of any uid in the
// socket's group maps its own. An adapter over Daemon::HandOffRing, like
// the gRPC one: no logic of its own beyond the wire format.
//
// Lifecycle: Start() listens (mode as the control socket) and runs one
// accept thread; each exchange runs on a thread of its own, bounded by a
// 2 s socket timeout, at most kMaxConcurrent at once (beyond that a
// request is refused as busy), so a stalled peer delays nobody else. Shutdown() (idempotent; also
// the destructor) stops the thread and removes the socket file; it must run
// before the Daemon is destroyed.
#ifndef STOKER_SERVER_DAEMON_RING_HANDOFF_H_
#define STOKER_SERVER_DAEMON_RING_HANDOFF_H_

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/daemon/daemon.h"

namespace stoker {

class RingHandoffServer {
 public:
  static absl::StatusOr<std::unique_ptr<RingHandoffServer>> Start(
      Daemon* daemon, const std::string& socket_path, mode_t mode);
  ~RingHandoffServer();
  void Shutdown();

  // Exchanges answered with a descriptor, and refused (tests, stats).
  uint64_t handed_off() const { return handed_off_.load(); }
  uint64_t refused() const { return refused_.load(); }

 private:
  RingHandoffServer(Daemon* daemon, std::string path, int listen_fd)
      : daemon_(daemon), path_(std::move(path)), listen_fd_(listen_fd) {}
  void Serve();
  void HandleOne(int sock);

  static constexpr int kMaxConcurrent = 32;

  Daemon* const daemon_;
  const std::string path_;
  const int listen_fd_;
  absl::Mutex mu_;
  int active_ ABSL_GUARDED_BY(mu_) = 0;  // Exchanges in progress.
  absl::flat_hash_set<int> open_ ABSL_GUARDED_BY(mu_);  // Their sockets.
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> handed_off_{0}, refused_{0};
};

}  // namespace stoker

#endif  // STOKER_SERVER_DAEMON_RING_HANDOFF_H_
