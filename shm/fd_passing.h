// Handing a ring's file descriptor from the daemon to its client over a
// Unix socket (SCM_RIGHTS), so segments stay mode 0600 and owned by the
// daemon's user while a client of any uid maps its own ring, and no other
// user can open it by name.
//
// The exchange, one per connection to the daemon's ring socket:
//   client -> "STOKER-RING 1 <session id> <token>\n"
//   daemon -> "OK\n" with the segment's fd attached, or
//             "ERR <canonical code number> <message>\n" without one.
// The token is a secret the daemon returned to the session's opener over
// the control channel; the peer's uid (SO_PEERCRED) must be the session's
// owner.
//
// The same socket proves who a client is to the control channel:
//   client -> "STOKER-AUTH 1\n"
//   daemon -> "OK <caller token>\n"  (the token of the peer's uid)
// and the client sends that token with every control call.
//
// Functions here are thread-safe and own nothing but what they return.
#ifndef STOKER_SHM_FD_PASSING_H_
#define STOKER_SHM_FD_PASSING_H_

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace stoker::shm {

// gRPC metadata key under which clients send their caller token.
inline constexpr char kCallerTokenMetadata[] = "stoker-caller-token";

// The ring socket next to control socket `socket_path`.
inline std::string RingSocketPath(const std::string& socket_path) {
  return socket_path + ".ring";
}

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// SO_PEERCRED of a connected Unix socket.
absl::StatusOr<PeerCredentials> GetPeerCredentials(int sock);

// The most descriptors one message carries (the kernel's SCM_MAX_FD).
inline constexpr size_t kMaxFdsPerMessage = 253;

// Sends `message` with `fd` attached (fd < 0: none).
absl::Status SendWithFd(int sock, const std::string& message, int fd);
// Sends `message` with every descriptor of `fds` attached, in order (at
// most kMaxFdsPerMessage). The caller keeps its descriptors.
absl::Status SendWithFds(int sock, const std::string& message, const std::vector<int>& fds);
// Closes every descriptor of *fds and empties it.
void CloseFds(std::vector<int>* fds);
// Appends the SCM_RIGHTS descriptors of a received `msg` to *fds, up to
// `max_fds` in all, and closes the others: none is ever left open unseen.
void TakeDescriptors(struct msghdr* msg, size_t max_fds, std::vector<int>* fds);

// Receives one message of at most `max_bytes`, ending in '\n' (not kept),
// and an attached fd if any (*fd = -1 otherwise; the caller owns it). The
// whole message must arrive by `deadline`, however it is split:
// DEADLINE_EXCEEDED otherwise (a peer dripping a byte at a time holds the
// exchange no longer than one that sends nothing).
absl::Status ReceiveWithFd(int sock, size_t max_bytes, std::string* message, int* fd,
                           absl::Time deadline = absl::InfiniteFuture());
// The same for a message that carries up to `max_fds` descriptors, in the
// order sent, into *fds (emptied first; the caller owns them). Every
// descriptor of every piece of the message is accounted for: those beyond
// `max_fds` are closed at once, and on any error (a message whose control
// data was cut, MSG_CTRUNC, included) so are the ones kept.
absl::Status ReceiveWithFds(int sock, size_t max_bytes, size_t max_fds, std::string* message,
                            std::vector<int>* fds,
                            absl::Time deadline = absl::InfiniteFuture());

// Sets SO_RCVTIMEO/SO_SNDTIMEO so a stalled peer cannot block forever.
absl::Status SetSocketTimeout(int sock, absl::Duration timeout);

// Client side of the exchange: connects to `socket_path`, asks for the
// ring of `session_id` with `token`, and returns the fd (caller closes).
// PERMISSION_DENIED / NOT_FOUND / ... as the daemon answers. A session
// with slabs (SessionSpec.slabs): the daemon sends their `slab_fds`
// descriptors after the ring's, in messages "SLABS <n>" of n (1 to
// kSlabFdsPerMessage) each, and they are appended to *slabs (the caller
// closes them; none are left there on an error).
inline constexpr size_t kSlabFdsPerMessage = 64;
absl::StatusOr<int> RequestRingFd(const std::string& socket_path,
                                  uint64_t session_id,
                                  const std::string& token,
                                  size_t slab_fds = 0, std::vector<int>* slabs = nullptr);

// Client side of the second exchange: the caller token of this process's
// uid from the daemon's ring socket `socket_path`.
absl::StatusOr<std::string> RequestCallerToken(const std::string& socket_path);

// A third: the client hands the daemon a descriptor of its dataset's
// folder and the daemon's end of its opener (shm/open_channel.h), through
// which the daemon has every file beneath opened with the caller's rights
// ("STOKER-ROOT 2" with both attached; answer "OK <root token>"). Returns
// the token for DatasetSpec.root_token; the caller keeps and closes its
// descriptors.
absl::StatusOr<std::string> ProveDatasetFolder(const std::string& socket_path,
                                               int folder_fd, int channel_fd);

// A fourth: the client hands the daemon its end of a signer (an opener
// channel that signs its session's object store requests, and opens
// nothing): "STOKER-SIGN 1" with it attached; answer "OK <signer token>".
// Returns the token for ObjectStoreAccess.signer_token; the caller keeps
// and closes its descriptor.
absl::StatusOr<std::string> HandOverSigner(const std::string& socket_path, int channel_fd);

// Connects a SOCK_STREAM socket to `path` (caller closes). PERMISSION_DENIED
// naming the socket when this user may not use it.
absl::StatusOr<int> ConnectUnix(const std::string& path,
                                absl::Duration timeout);

// Makes `path` free for a new listening socket: OK if nothing is there or
// a leftover socket file with no server behind it (removed);
// FAILED_PRECONDITION if a server answers there, or if the socket's folder
// could let another user replace the socket (see CheckSocketFolder).
absl::Status ClaimSocketPath(const std::string& path);

// The folder of socket `path` must belong to `trusted_uid` or root and be
// writable by nobody else (no group or other write bit): then only its
// owner can create, replace or swap the socket for a symlink.
// FAILED_PRECONDITION naming the folder and its mode otherwise.
absl::Status CheckSocketFolder(const std::string& path, uid_t trusted_uid);

// Sets a just-bound socket file's mode without following a symlink.
absl::Status SetSocketMode(const std::string& path, mode_t mode);

// Checks the server at the other end of connected socket `sock` (bound at
// `path`) by shm/server_trust.h's rule: the folder and the server's uid on
// this connection (SO_PEERCRED) must be root's, this process's or the node
// service's user's. FAILED_PRECONDITION / PERMISSION_DENIED otherwise.
absl::Status VerifyServer(int sock, const std::string& path);
// The same, given what the folder of `path` is (its stat, taken by the
// caller: of a folder it holds open, shm/pinned_socket.h).
absl::Status VerifyServerIn(int sock, const std::string& path, const struct stat& folder);
// The folder of socket `path`, named plainly (not through '.', '..' or
// '//', which would follow a symlink); FAILED_PRECONDITION otherwise.
absl::StatusOr<std::string> PlainSocketFolder(const std::string& path);

}  // namespace stoker::shm

#endif  // STOKER_SHM_FD_PASSING_H_
