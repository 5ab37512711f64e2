#include "shm/fd_passing.h"

#include <poll.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "shm/server_trust.h"
#include "util/status_macros.h"

namespace stoker::shm {

absl::StatusOr<PeerCredentials> GetPeerCredentials(int sock) {
  struct ucred cred {};
  socklen_t len = sizeof(cred);
  if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return ErrnoStatus(errno, "SO_PEERCRED");
  }
  return PeerCredentials{cred.pid, cred.uid, cred.gid};
}

absl::Status SendWithFds(int sock, const std::string& message, const std::vector<int>& fds) {
  if (fds.size() > kMaxFdsPerMessage) {
    return absl::InvalidArgumentError(absl::StrCat("at most ", kMaxFdsPerMessage,
                                                   " descriptors go in one message"));
  }
  struct iovec iov {};
  iov.iov_base = const_cast<char*>(message.data());
  iov.iov_len = message.size();
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control;
  if (!fds.empty()) {
    // cmsghdr alignment: the vector's storage is new[]-aligned.
    control.assign(CMSG_SPACE(sizeof(int) * fds.size()), 0);
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t n;
  do {
    n = sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return ErrnoStatus(errno, "sending on the ring socket");
  if (static_cast<size_t>(n) != message.size()) {
    return absl::UnavailableError("ring socket: short send");
  }
  return absl::OkStatus();
}

absl::Status SendWithFd(int sock, const std::string& message, int fd) {
  return fd >= 0 ? SendWithFds(sock, message, {fd}) : SendWithFds(sock, message, {});
}

void CloseFds(std::vector<int>* fds) {
  for (int fd : *fds) close(fd);
  fds->clear();
}

void TakeDescriptors(struct msghdr* msg, size_t max_fds, std::vector<int>* fds) {
  for (struct cmsghdr* c = CMSG_FIRSTHDR(msg); c != nullptr; c = CMSG_NXTHDR(msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int got;
      std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (fds->size() < max_fds) {
        fds->push_back(got);
      } else {
        close(got);  // Beyond what this exchange carries: never kept.
      }
    }
  }
}

absl::Status ReceiveWithFds(int sock, size_t max_bytes, size_t max_fds, std::string* message,
                            std::vector<int>* fds, absl::Time deadline) {
  CloseFds(fds);
  message->clear();
  std::vector<char> buf(max_bytes);
  // Room for more descriptors than expected, so extras arrive (and are
  // closed here) rather than truncate the control data.
  std::vector<char> control(CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage));
  size_t used = 0;
  absl::Status failed;
  while (used < max_bytes) {
    struct iovec iov {};
    iov.iov_base = buf.data() + used;
    iov.iov_len = max_bytes - used;
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    ssize_t n = -1;
    int err = 0;
    bool late = false;
    // Without a deadline the socket's own timeout (SetSocketTimeout) bounds
    // each recvmsg; with one, poll waits no longer than what is left.
    while (deadline != absl::InfiniteFuture()) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        late = true;
        break;
      }
      struct pollfd p {sock, POLLIN, 0};
      const int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(
                                        absl::ToInt64Milliseconds(left) + 1, 60'000)));
      if (ready == 0 || (ready < 0 && errno == EINTR)) continue;  // Deadline again.
      if (ready < 0) {
        err = errno;
        break;
      }
      n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
      if (n >= 0) break;
      if (errno != EINTR) {
        err = errno;
        break;
      }
    }
    if (deadline == absl::InfiniteFuture()) {
      do {
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
      } while (n < 0 && errno == EINTR);
      err = errno;
    }
    if (late) {
      failed = absl::DeadlineExceededError("ring socket: the message did not arrive in time");
      break;
    }
    if (n < 0) {
      failed = ErrnoStatus(err, "reading the ring socket");
      break;
    }
    TakeDescriptors(&msg, max_fds, fds);
    if ((msg.msg_flags & MSG_CTRUNC) != 0) {
      failed = absl::InvalidArgumentError("ring socket: too many descriptors in one message");
      break;
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
    if (std::memchr(buf.data(), '\n', used) != nullptr) break;
  }
  const char* end = static_cast<const char*>(std::memchr(buf.data(), '\n', used));
  if (failed.ok() && end == nullptr) {
    failed = absl::InvalidArgumentError(used == max_bytes
                                            ? "ring socket: message too long"
                                            : "ring socket: connection closed mid-message");
  }
  if (!failed.ok()) {
    CloseFds(fds);
    return failed;
  }
  message->assign(buf.data(), static_cast<size_t>(end - buf.data()));
  return absl::OkStatus();
}

absl::Status ReceiveWithFd(int sock, size_t max_bytes, std::string* message, int* fd,
                           absl::Time deadline) {
  std::vector<int> fds;
  absl::Status s = ReceiveWithFds(sock, max_bytes, 1, message, &fds, deadline);
  *fd = fds.empty() ? -1 : fds[0];
  return s;
}

absl::Status SetSocketTimeout(int sock, absl::Duration timeout) {
  struct timeval tv = absl::ToTimeval(timeout);
  if (setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
      setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0) {
    return ErrnoStatus(errno, "setting the ring socket's timeout");
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ConnectUnix(const std::string& path,
                                absl::Duration timeout) {
  struct sockaddr_un addr {};
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("socket path is too long: ", path));
  }
  int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return ErrnoStatus(errno, "socket(AF_UNIX)");
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  SetSocketTimeout(sock, timeout).IgnoreError();
  if (connect(sock, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    close(sock);
    if (err == EACCES || err == EPERM) {
      return absl::PermissionDeniedError(absl::StrCat(
          "this user (uid ", getuid(), ") may not use the socket ", path,
          ": ask for the group that owns it (usually `stoker`)"));
    }
    return ErrnoStatus(err, absl::StrCat("connecting to ", path));
  }
  return sock;
}

namespace {

// One request/answer exchange on the ring socket, the server verified;
// returns the answer line and its descriptor (-1 if none; caller closes).
// `more` (if set) reads what follows an answer that carried a descriptor.
absl::StatusOr<std::pair<std::string, int>> Exchange(
    const std::string& socket_path, const std::string& request,
    const std::vector<int>& send_fds = {},
    const std::function<absl::Status(int sock)>& more = nullptr) {
  STOKER_ASSIGN_OR_RETURN(int sock, ConnectUnix(socket_path, absl::Seconds(10)));
  absl::Status s = VerifyServer(sock, socket_path);
  if (s.ok()) s = SendWithFds(sock, request, send_fds);
  std::string reply;
  int fd = -1;
  if (s.ok()) s = ReceiveWithFd(sock, 4096, &reply, &fd);
  if (s.ok() && fd >= 0 && more) s = more(sock);
  close(sock);
  if (!s.ok()) {
    if (fd >= 0) close(fd);
    return s;
  }
  return std::make_pair(reply, fd);
}

// The daemon's "ERR <code> <message>" as a Status.
absl::Status ErrorReply(const std::string& reply, const std::string& socket_path) {
  std::vector<std::string> parts = absl::StrSplit(reply, absl::MaxSplits(' ', 2));
  int code = 0;
  if (parts.size() == 3 && parts[0] == "ERR" && absl::SimpleAtoi(parts[1], &code) &&
      code > 0 && code <= 16) {
    return absl::Status(static_cast<absl::StatusCode>(code), parts[2]);
  }
  return absl::InternalError(
      absl::StrCat("unexpected answer from the ring socket ", socket_path));
}

}  // namespace

absl::StatusOr<std::string> RequestCallerToken(const std::string& socket_path) {
  STOKER_ASSIGN_OR_RETURN(auto answer, Exchange(socket_path, "STOKER-AUTH 1\n"));
  if (answer.second >= 0) close(answer.second);
  if (absl::StartsWith(answer.first, "OK ") && answer.first.size() > 3) {
    return answer.first.substr(3);
  }
  return ErrorReply(answer.first, socket_path);
}

namespace {
// An exchange whose answer is "OK <token>".
absl::StatusOr<std::string> HandOver(const std::string& socket_path, const char* request,
                                     const std::vector<int>& fds) {
  STOKER_ASSIGN_OR_RETURN(auto answer, Exchange(socket_path, request, fds));
  if (answer.second >= 0) close(answer.second);
  if (absl::StartsWith(answer.first, "OK ") && answer.first.size() > 3) {
    return answer.first.substr(3);
  }
  return ErrorReply(answer.first, socket_path);
}
}  // namespace

absl::StatusOr<std::string> ProveDatasetFolder(const std::string& socket_path,
                                               int folder_fd, int channel_fd) {
  return HandOver(socket_path, "STOKER-ROOT 2\n", {folder_fd, channel_fd});
}

absl::StatusOr<std::string> HandOverSigner(const std::string& socket_path, int channel_fd) {
  return HandOver(socket_path, "STOKER-SIGN 1\n", {channel_fd});
}

absl::StatusOr<int> RequestRingFd(const std::string& socket_path,
                                  uint64_t session_id,
                                  const std::string& token,
                                  size_t slab_fds, std::vector<int>* slabs) {
  // The slabs' descriptors follow the ring's, kSlabFdsPerMessage a message.
  auto more = [&](int sock) {
    while (slabs->size() < slab_fds) {
      std::string line;
      std::vector<int> got;
      absl::Status s = ReceiveWithFds(sock, 64, kSlabFdsPerMessage, &line, &got,
                                      absl::Now() + absl::Seconds(10));
      slabs->insert(slabs->end(), got.begin(), got.end());
      if (!s.ok()) return s;
      if (line != absl::StrCat("SLABS ", got.size()) || got.empty()) {
        return absl::InternalError(absl::StrCat("unexpected slabs from the ring socket ",
                                                socket_path, ": '", line, "'"));
      }
    }
    return slabs->size() == slab_fds
               ? absl::OkStatus()
               : absl::InternalError(absl::StrCat("more slabs than the ring's ", slab_fds));
  };
  auto answer = Exchange(socket_path,
                         absl::StrCat("STOKER-RING 1 ", session_id, " ", token, "\n"), {},
                         slabs != nullptr ? std::function<absl::Status(int)>(more) : nullptr);
  if (!answer.ok() && slabs != nullptr) CloseFds(slabs);
  if (!answer.ok()) return answer.status();
  if (answer->first == "OK" && answer->second >= 0) return answer->second;
  if (answer->second >= 0) close(answer->second);
  if (slabs != nullptr) CloseFds(slabs);
  return ErrorReply(answer->first, socket_path);
}

namespace {
std::string FolderOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}
}  // namespace

absl::Status CheckSocketFolder(const std::string& path, uid_t trusted_uid) {
  const std::string folder = FolderOf(path);
  struct stat st {};
  if (lstat(folder.c_str(), &st) != 0) {
    return ErrnoStatus(errno, absl::StrCat("socket folder ", folder));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("socket folder ", folder, " is not a folder (a symlink?)"));
  }
  if ((st.st_uid != trusted_uid && st.st_uid != 0) || (st.st_mode & 022) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "socket folder %s (owner uid %d, mode %04o) lets other users create "
        "or replace sockets in it; use a folder only the daemon's user can "
        "write, such as /run/stoker",
        folder, st.st_uid, st.st_mode & 07777));
  }
  return absl::OkStatus();
}

absl::Status SetSocketMode(const std::string& path, mode_t mode) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return ErrnoStatus(errno, path);
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a socket"));
  }
  if (fchmodat(AT_FDCWD, path.c_str(), mode, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno != ENOTSUP && errno != EOPNOTSUPP) {
      return ErrnoStatus(errno, absl::StrCat("chmod ", path));
    }
    // No /proc to do it without following: the lstat above and the folder
    // check (only we can write there) make the plain call safe.
    if (chmod(path.c_str(), mode) != 0) {
      return ErrnoStatus(errno, absl::StrCat("chmod ", path));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> PlainSocketFolder(const std::string& path) {
  const std::string folder = FolderOf(path);
  // Named plainly: lstat of "link/." or "link/" would follow a symlink.
  const std::string last = folder.substr(folder.rfind('/') + 1);
  if ((last.empty() && folder != "/") || last == ".." ||
      (last == "." && folder != ".")) {
    return absl::FailedPreconditionError(absl::StrCat(
        "socket ", path, " names its folder through '.', '..' or '//': name it plainly"));
  }
  return folder;
}

absl::Status VerifyServerIn(int sock, const std::string& path, const struct stat& folder) {
  if (!S_ISDIR(folder.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("socket folder ", FolderOf(path), " is not a folder (a symlink?)"));
  }
  STOKER_ASSIGN_OR_RETURN(TrustedDaemons trusted, TrustedDaemonsFromEnvironment());
  STOKER_ASSIGN_OR_RETURN(PeerCredentials peer, GetPeerCredentials(sock));
  return CheckServer(path, folder.st_uid, folder.st_mode, peer.uid, trusted);
}

absl::Status VerifyServer(int sock, const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(const std::string folder, PlainSocketFolder(path));
  struct stat st {};
  if (lstat(folder.c_str(), &st) != 0) {
    return ErrnoStatus(errno, absl::StrCat("socket folder ", folder));
  }
  return VerifyServerIn(sock, path, st);
}

absl::Status ClaimSocketPath(const std::string& path) {
  STOKER_RETURN_IF_ERROR(CheckSocketFolder(path, geteuid()));
  if (access(path.c_str(), F_OK) != 0) return absl::OkStatus();
  absl::StatusOr<int> sock = ConnectUnix(path, absl::Seconds(1));
  if (sock.ok()) {
    close(*sock);
    return absl::FailedPreconditionError(
        absl::StrCat("another server is already listening on ", path));
  }
  unlink(path.c_str());
  return absl::OkStatus();
}

}  // namespace stoker::shm
