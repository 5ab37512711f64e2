#include "client/cpp/daemon_locator.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace stoker {

std::string DaemonLocation::Describe() const {
  if (!embedded) return absl::StrCat("the daemon at ", socket);
  return absl::StrCat("this user's embedded daemon at ", socket, " (its log: ", log, ")");
}

bool SocketAnswers(const std::string& path) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) return false;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  // EAGAIN: a listener whose backlog is full, a busy daemon; never waited for.
  const bool ok = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0 ||
                  errno == EAGAIN;
  close(fd);
  return ok;
}

absl::StatusOr<DaemonLocation> LocateDaemon(
    const Getenv& getenv, const std::function<bool(const std::string&)>& answers, long uid) {
  auto answering = [&](const std::string& path) {
    return answers ? answers(path) : SocketAnswers(path);
  };
  const std::string named = EnvValue(getenv, "STOKER_SOCKET");
  DaemonLocation at;
  if (!named.empty() && named != kEmbeddedName) {
    if (!answering(named)) {
      return absl::UnavailableError(absl::StrCat(
          "STOKER_SOCKET names ", named, ", where no daemon answers; unset it to use the "
          "node's daemon (", kNodeSocket, ") or else this user's embedded one, or set "
          "STOKER_SOCKET=", kEmbeddedName));
    }
    at.socket = named;
    return at;
  }
  if (named.empty() && answering(kNodeSocket)) {
    at.socket = kNodeSocket;
    return at;
  }
  std::string folder = EnvValue(getenv, "STOKER_EMBEDDED_DIR");
  if (folder.empty()) {
    folder = absl::StrCat("/tmp/stoker-embedded-", uid >= 0 ? uid : static_cast<long>(getuid()));
  }
  at.embedded = true;
  at.socket = absl::StrCat(folder, "/stoker.sock");
  at.log = absl::StrCat(folder, "/stokerd.log");
  return at;
}

}  // namespace stoker
