#include "server/daemon/ring_handoff.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "shm/fd_passing.h"
#include "util/log.h"
#include "util/status_macros.h"

namespace stoker {

absl::StatusOr<std::unique_ptr<RingHandoffServer>> RingHandoffServer::Start(
    Daemon* daemon, const std::string& socket_path, mode_t mode) {
  struct sockaddr_un addr {};
  if (socket_path.empty() || socket_path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ring socket path '", socket_path, "' must be 1..",
        sizeof(addr.sun_path) - 1, " characters"));
  }
  STOKER_RETURN_IF_ERROR(shm::ClaimSocketPath(socket_path));
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(errno, "socket(AF_UNIX)");
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  if (bind(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 64) != 0) {
    const int err = errno;
    close(fd);
    unlink(socket_path.c_str());
    return ErrnoStatus(err, absl::StrCat("listening on ", socket_path));
  }
  if (absl::Status s = shm::SetSocketMode(socket_path, mode); !s.ok()) {
    close(fd);
    unlink(socket_path.c_str());
    return s;
  }
  std::unique_ptr<RingHandoffServer> server(
      new RingHandoffServer(daemon, socket_path, fd));
  server->thread_ = std::thread(
      [s = server.get()] { RunLoggingExceptions("ring handoff server", [&] { s->Serve(); }); });
  return server;
}

RingHandoffServer::~RingHandoffServer() { Shutdown(); }

void RingHandoffServer::Shutdown() {
  if (stop_.exchange(true)) return;
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  unlink(path_.c_str());
}

void RingHandoffServer::Serve() {
  while (!stop_.load()) {
    struct pollfd p {listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;  // Rechecks stop_ every 100 ms.
    int sock = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (sock < 0) continue;
    {
      absl::MutexLock lock(&mu_);
      if (active_ >= kMaxConcurrent) {
        // Everyone else is slow or stalled: say so at once.
        shm::SetSocketTimeout(sock, absl::Milliseconds(100)).IgnoreError();
        shm::SendWithFd(sock, absl::StrCat("ERR ", static_cast<int>(
                                  absl::StatusCode::kResourceExhausted),
                              " the ring socket is busy; try again\n"), -1)
            .IgnoreError();
        close(sock);
        continue;
      }
      ++active_;
      open_.insert(sock);
    }
    // Each exchange on its own thread (bounded by its 2 s socket timeout),
    // so one stalled peer does not hold up the others.
    std::thread([this, sock] {
      RunLoggingExceptions("ring handoff", [&] { HandleOne(sock); });
      absl::MutexLock lock(&mu_);
      open_.erase(sock);
      close(sock);
      --active_;
    }).detach();
  }
  absl::MutexLock lock(&mu_);
  // A stop cuts the exchanges still waiting on their peers.
  for (int sock : open_) shutdown(sock, SHUT_RDWR);
  mu_.Await(absl::Condition(+[](int* n) { return *n == 0; }, &active_));
}

void RingHandoffServer::HandleOne(int sock) {
  // One deadline for the whole exchange, however the peer splits it.
  const absl::Time deadline = absl::Now() + absl::Seconds(2);
  shm::SetSocketTimeout(sock, absl::Seconds(2)).IgnoreError();
  absl::StatusOr<shm::PeerCredentials> peer = shm::GetPeerCredentials(sock);
  std::string request;
  // A root exchange carries two descriptors (the folder, the opener's
  // end), a signer's one; every other none. Whatever else arrives is closed.
  std::vector<int> fds;
  absl::Status s = peer.status();
  if (s.ok()) s = shm::ReceiveWithFds(sock, 256, 2, &request, &fds, deadline);
  if (s.ok() && request == "STOKER-ROOT 2" && fds.size() == 2) {
    const std::string token = daemon_->authorizer().RegisterRoot(fds[0], fds[1], peer->uid);
    shm::SendWithFd(sock, absl::StrCat("OK ", token, "\n"), -1).IgnoreError();
    return;
  }
  if (s.ok() && request == "STOKER-SIGN 1" && fds.size() == 1) {
    // A signer: an opener with no folder.
    const std::string token = daemon_->authorizer().RegisterRoot(-1, fds[0], peer->uid);
    shm::SendWithFd(sock, absl::StrCat("OK ", token, "\n"), -1).IgnoreError();
    return;
  }
  shm::CloseFds(&fds);
  if (s.ok() && absl::StartsWith(request, "STOKER-ROOT")) {
    s = absl::FailedPreconditionError(
        "a dataset is proven with its folder and the client's opener (STOKER-ROOT 2 with two "
        "descriptors): this client is older than the daemon");
  }
  if (s.ok() && request == "STOKER-AUTH 1") {
    shm::SendWithFd(sock, absl::StrCat("OK ", daemon_->authorizer().IssueToken(peer->uid), "\n"),
                    -1)
        .IgnoreError();
    return;
  }
  std::vector<std::string> parts = absl::StrSplit(request, ' ');
  uint64_t session_id = 0;
  if (s.ok() && (parts.size() != 4 || parts[0] != "STOKER-RING" ||
                 parts[1] != "1" || !absl::SimpleAtoi(parts[2], &session_id))) {
    s = absl::InvalidArgumentError("malformed ring request");
  }
  absl::StatusOr<int> fd =
      s.ok() ? daemon_->HandOffRing(session_id, parts[3], peer->uid, peer->pid)
             : absl::StatusOr<int>(s);
  // Counted before answering: a client that has its answer sees the count.
  if (fd.ok()) {
    handed_off_.fetch_add(1);
    absl::Status sent = shm::SendWithFd(sock, "OK\n", *fd);
    close(*fd);
    // Its slabs' descriptors (none without SessionSpec.slabs) follow, to
    // a client that has its ring.
    if (!sent.ok()) return;
    absl::StatusOr<std::vector<int>> slabs = daemon_->SlabDescriptors(session_id);
    if (!slabs.ok()) LogInfo(absl::StrCat("slabs not handed off: ", slabs.status().ToString()));
    for (size_t i = 0; slabs.ok() && sent.ok() && i < slabs->size();
         i += shm::kSlabFdsPerMessage) {
      const size_t end = std::min(slabs->size(), i + shm::kSlabFdsPerMessage);
      const std::vector<int> some(slabs->begin() + i, slabs->begin() + end);
      sent = shm::SendWithFds(sock, absl::StrCat("SLABS ", some.size(), "\n"), some);
    }
    if (slabs.ok()) shm::CloseFds(&*slabs);
    return;
  }
  refused_.fetch_add(1);
  LogInfo(absl::StrCat("ring handoff refused",
                       peer.ok() ? absl::StrCat(" (uid ", peer->uid, ", pid ",
                                                peer->pid, ")")
                                 : std::string(),
                       ": ", fd.status().ToString()));
  shm::SendWithFd(sock,
                  absl::StrCat("ERR ", static_cast<int>(fd.status().code()), " ",
                               fd.status().message(), "\n"),
                  -1)
      .IgnoreError();
}

}  // namespace stoker
