#include "shm/pinned_socket.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "shm/fd_passing.h"
#include "util/status_macros.h"

namespace stoker::shm {

absl::StatusOr<std::shared_ptr<const PinnedSocket>> PinnedSocket::Pin(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(const std::string folder, PlainSocketFolder(path));
  const int fd = open(folder.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::UnavailableError(
          absl::StrCat("no stokerd answering on unix:", path, ": its folder is missing"));
    }
    if (err == ENOTDIR || err == ELOOP) {
      return absl::FailedPreconditionError(
          absl::StrCat("socket folder ", folder, " is not a folder (a symlink?)"));
    }
    return ErrnoStatus(err, absl::StrCat("socket folder ", folder));
  }
  std::shared_ptr<PinnedSocket> p(new PinnedSocket);
  p->folder_fd_ = fd;
  p->path_ = path;
  p->folder_ = folder;
  const std::string name = path.substr(path.rfind('/') + 1);
  const std::string held = absl::StrCat("/proc/self/fd/", fd);
  // /proc/self/fd/N is this very folder (not an unmounted /proc, nor a
  // folder someone mounted there), and the path fits.
  struct stat via {}, opened {};
  const bool pins = stat(held.c_str(), &via) == 0 && fstat(fd, &opened) == 0 &&
                    via.st_dev == opened.st_dev && via.st_ino == opened.st_ino &&
                    held.size() + 1 + name.size() < sizeof(sockaddr_un::sun_path);
  p->pinned_ = pins ? absl::StrCat(held, "/", name) : path;
  return std::shared_ptr<const PinnedSocket>(std::move(p));
}

PinnedSocket::~PinnedSocket() {
  if (folder_fd_ >= 0) close(folder_fd_);
}

bool PinnedSocket::Current() const {
  struct stat now {}, opened {};
  return lstat(folder_.c_str(), &now) == 0 && fstat(folder_fd_, &opened) == 0 &&
         now.st_dev == opened.st_dev && now.st_ino == opened.st_ino;
}

absl::Status VerifyServer(int sock, const PinnedSocket& at) {
  // Not pinned (no /proc): `sock` went by path; check what the path names.
  if (at.pinned() == at.path()) return VerifyServer(sock, at.path());
  struct stat st {};
  if (fstat(at.folder_fd(), &st) != 0) {
    return ErrnoStatus(errno, absl::StrCat("socket folder of ", at.path()));
  }
  return VerifyServerIn(sock, at.path(), st);
}

}  // namespace stoker::shm
