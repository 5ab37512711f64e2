// A Unix socket reached through its folder, opened once. A client checks
// the socket's folder (its owner, its mode) and the server on a connection,
// and then gRPC connects by itself, again whenever its connection drops: by
// path, the owner of a folder above could swap the checked folder for one
// of their own in between. Pinned, every connection goes to the folder
// that was opened and checked, whatever the path names by then.
//
// `path()` is the socket as named, for messages; connect to `pinned()`,
// "/proc/self/fd/N/<name>": a path like any other to connect(2) and to
// gRPC, under the 108-byte limit. (Not for VerifyServer(sock, path), which
// refuses a folder reached through a symlink, as /proc/self/fd/N is: use
// the overload below.)
// Where /proc is not mounted (or the name would not fit), `pinned()` is
// `path()`, and only the checks on each connection hold. The folder's
// descriptor is closed when the PinnedSocket goes, so whatever connects
// through it (a gRPC channel) must hold it that long. A daemon that
// restarts in a new folder (systemd's RuntimeDirectory) is not reached
// through an old pin: `Current()` says so, and the caller pins afresh.
//
// Immutable after Pin; thread-safe.
#ifndef STOKER_SHM_PINNED_SOCKET_H_
#define STOKER_SHM_PINNED_SOCKET_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace stoker::shm {

class PinnedSocket {
 public:
  // Opens `path`'s folder, named plainly, not through a symlink. A
  // missing folder is UNAVAILABLE (a daemon that is not there yet);
  // FAILED_PRECONDITION for a symlink, a folder named through '.', '..' or
  // '//', or not a folder.
  static absl::StatusOr<std::shared_ptr<const PinnedSocket>> Pin(const std::string& path);
  ~PinnedSocket();
  PinnedSocket(const PinnedSocket&) = delete;
  PinnedSocket& operator=(const PinnedSocket&) = delete;

  const std::string& path() const { return path_; }
  const std::string& pinned() const { return pinned_; }
  int folder_fd() const { return folder_fd_; }
  // Whether path()'s folder is still the one pinned.
  bool Current() const;

 private:
  PinnedSocket() = default;
  int folder_fd_ = -1;
  std::string path_, pinned_, folder_;
};

// VerifyServer (fd_passing.h) of the server on `sock`, connected through
// `at`: the folder checked is the one `at` holds; messages name at.path().
absl::Status VerifyServer(int sock, const PinnedSocket& at);

}  // namespace stoker::shm

#endif  // STOKER_SHM_PINNED_SOCKET_H_
