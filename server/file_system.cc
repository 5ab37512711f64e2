#include "server/file_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "util/status_macros.h"

namespace stoker {

Beneath::~Beneath() {
  if (dir_fd >= 0) close(dir_fd);
}

absl::Status FileGuard::Check(const struct stat& st, const std::string& path) const {
  const auto dev = static_cast<uint64_t>(st.st_dev);
  const auto ino = static_cast<uint64_t>(st.st_ino);
  bool refused = daemon_uid >= 0 && static_cast<int64_t>(st.st_uid) == daemon_uid;
  for (uint64_t d : devices) refused = refused || d == dev;
  for (const auto& [d, i] : inodes) refused = refused || (d == dev && i == ino);
  if (!refused) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      path, " is one of the daemon's own files (its rings, caches, sockets or a "
      "file its user owns): a dataset may not name it"));
}

FileVersion VersionOf(const struct stat& st) {
  return FileVersion{static_cast<uint64_t>(st.st_size),
                     static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 +
                         st.st_mtim.tv_nsec,
                     static_cast<uint64_t>(st.st_dev),
                     static_cast<uint64_t>(st.st_ino)};
}

namespace {

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

absl::Status NotRegular(const std::string& path, const char* kind) {
  return absl::FailedPreconditionError(
      absl::StrCat(path, " is ", kind, ": only regular files are read"));
}

// open(2) or, confined, openat2(2) beneath the folder; -1 and *err on failure.
int OpenRaw(const std::string& path, uint64_t flags, const Beneath* beneath, int* err) {
  long fd;
  if (beneath == nullptr) {
    fd = open(path.c_str(), static_cast<int>(flags));
  } else {
    struct open_how how {};
    how.flags = flags;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    const size_t cut = beneath->prefix == "/" ? 0 : beneath->prefix.size();
    const std::string rel = path.substr(cut + 1);
    fd = syscall(SYS_openat2, beneath->dir_fd, rel.c_str(), &how, sizeof(how));
  }
  *err = errno;
  return static_cast<int>(fd);
}

// PERMISSION_DENIED when a confined `path` does not lie below the folder.
absl::Status CheckBeneath(const std::string& path, const Beneath* beneath) {
  if (beneath == nullptr) return absl::OkStatus();
  const std::string& pre = beneath->prefix;
  // "/" confines to the whole tree: every absolute path is beneath it.
  const size_t cut = pre == "/" ? 0 : pre.size();
  if (path.size() <= cut + 1 || path.compare(0, cut, pre, 0, cut) != 0 || path[cut] != '/') {
    return absl::PermissionDeniedError(absl::StrCat(path, " is outside the dataset folder ", pre));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ListFolder(const std::string& path,
                                                    const Beneath* beneath,
                                                    uint64_t max_entries) {
  const std::string trimmed = path.size() > 1 && path.back() == '/' ? path.substr(0, path.size() - 1)
                                                                   : path;
  int err = 0, fd = -1;
  const uint64_t flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK;
  if (beneath != nullptr && trimmed == beneath->prefix) {
    // Its own open file description: a dup would share the offset.
    fd = openat(beneath->dir_fd, ".", static_cast<int>(flags));
    err = errno;
  } else {
    STOKER_RETURN_IF_ERROR(CheckBeneath(trimmed, beneath));
    fd = OpenRaw(trimmed, flags, beneath, &err);
  }
  if (fd < 0) {
    if (err == EXDEV && beneath != nullptr)
      return absl::PermissionDeniedError(
          absl::StrCat(path, " leads outside the dataset folder ", beneath->prefix));
    if (err == ENOTDIR) return NotRegular(path, "not a folder");
    return ErrnoStatus(err, path);
  }
  struct stat st;
  if (fstat(fd, &st) == 0 && beneath != nullptr && beneath->guard != nullptr) {
    absl::Status s = beneath->guard->Check(st, path);
    if (!s.ok()) {
      close(fd);
      return s;
    }
  }
  DIR* dir = fdopendir(fd);
  if (dir == nullptr) {
    err = errno;
    close(fd);
    return ErrnoStatus(err, path);
  }
  std::vector<std::string> names;
  absl::Status s;
  while (const dirent* e = readdir(dir)) {
    const absl::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    if (names.size() >= max_entries) {
      s = absl::ResourceExhaustedError(absl::StrCat(
          path, " holds over ", max_entries, " entries (--max-dataset-files)"));
      break;
    }
    names.emplace_back(name);
  }
  closedir(dir);
  if (!s.ok()) return s;
  std::sort(names.begin(), names.end());
  return names;
}

std::string InFolder(const std::string& folder, const std::string& name) {
  return absl::StrCat(absl::StripSuffix(folder, "/"), "/", name);
}

absl::StatusOr<std::string> ReadHead(const std::string& path, const Beneath* beneath, size_t n) {
  STOKER_ASSIGN_OR_RETURN(const int fd, OpenConfined(path, O_RDONLY, beneath));
  std::string head(n, '\0');
  const ssize_t got = pread(fd, head.data(), n, 0);
  const int err = errno;
  close(fd);
  if (got < 0) return ErrnoStatus(err, path);
  head.resize(static_cast<size_t>(got));
  return head;
}

absl::StatusOr<int> OpenConfined(const std::string& path, uint64_t flags,
                                 const Beneath* beneath, struct stat* st_out) {
  STOKER_RETURN_IF_ERROR(CheckBeneath(path, beneath));
  flags |= O_CLOEXEC;
  // Non-blocking: opening a FIFO for reading must not wait for a writer.
  if ((flags & O_PATH) == 0) flags |= O_NONBLOCK | O_NOCTTY;
  int err = 0;
  const int fd = OpenRaw(path, flags, beneath, &err);
  if (fd < 0) {
    if (err == EXDEV && beneath != nullptr) {
      return absl::PermissionDeniedError(
          absl::StrCat(path, " leads outside the dataset folder ", beneath->prefix));
    }
    if (err == ENXIO) return NotRegular(path, "a socket or a device");
    return ErrnoStatus(err, path);
  }
  struct stat st;
  absl::Status s;
  if (fstat(fd, &st) != 0) {
    s = ErrnoStatus(errno, path);
  } else if (!S_ISREG(st.st_mode)) {
    s = NotRegular(path, KindOf(st.st_mode));
  } else if (beneath != nullptr && beneath->guard != nullptr) {
    s = beneath->guard->Check(st, path);
  }
  if (!s.ok()) {
    close(fd);
    return s;
  }
  if (st_out != nullptr) *st_out = st;
  return fd;
}

namespace {

class PosixFileSystem : public FileSystem {
 public:
  absl::Status ReadFile(const std::string& path, std::string* contents,
                        FileVersion* version, const Beneath* beneath,
                        uint64_t max_bytes) override {
    struct stat st;
    STOKER_ASSIGN_OR_RETURN(int fd, OpenConfined(path, O_RDONLY, beneath, &st));
    absl::Status s = ReadOpen(fd, st, path, max_bytes, contents, version);
    close(fd);
    return s;
  }

  absl::StatusOr<FileVersion> Stat(const std::string& path,
                                   const Beneath* beneath) override {
    struct stat st;
    STOKER_ASSIGN_OR_RETURN(int fd, OpenConfined(path, O_PATH, beneath, &st));
    close(fd);
    return VersionOf(st);
  }

 private:
  static absl::Status ReadOpen(int fd, const struct stat& st, const std::string& path,
                               uint64_t max_bytes, std::string* contents,
                               FileVersion* version) {
    // Before any allocation: a sparse file may claim a terabyte.
    if (static_cast<uint64_t>(st.st_size) > max_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          path, " is ", st.st_size, " bytes, over the daemon's limit of ", max_bytes,
          " bytes for one file (--max-file-bytes)"));
    }
    if (version != nullptr) *version = VersionOf(st);
    contents->resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < contents->size()) {
      ssize_t n = pread(fd, contents->data() + done, contents->size() - done,
                        static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoStatus(errno, path);
      if (n == 0) {
        return absl::DataLossError(absl::StrCat(
            path, ": file shrank while reading (", done, " of ",
            contents->size(), " bytes)"));
      }
      done += static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }
};

}  // namespace

FileSystem* FileSystem::Default() {
  static FileSystem* fs = new PosixFileSystem;
  return fs;
}

absl::Status FaultInjectingFileSystem::ReadFile(const std::string& path,
                                                std::string* contents,
                                                FileVersion* version,
                                                const Beneath* beneath,
                                                uint64_t max_bytes) {
  reads.fetch_add(1, std::memory_order_relaxed);
  if (latency > absl::ZeroDuration()) absl::SleepFor(latency);
  if (!fail_substring.empty() && absl::StrContains(path, fail_substring)) {
    return absl::UnavailableError(absl::StrCat(path, ": injected read error"));
  }
  if (!throw_substring.empty() && absl::StrContains(path, throw_substring)) {
    throw std::runtime_error("injected exception");
  }
  absl::Status s = base_->ReadFile(path, contents, version, beneath, max_bytes);
  if (s.ok() && short_read_bytes >= 0 &&
      contents->size() > static_cast<size_t>(short_read_bytes)) {
    contents->resize(static_cast<size_t>(short_read_bytes));
  }
  return s;
}

absl::StatusOr<FileVersion> FaultInjectingFileSystem::Stat(
    const std::string& path, const Beneath* beneath) {
  stats.fetch_add(1, std::memory_order_relaxed);
  if (latency > absl::ZeroDuration()) absl::SleepFor(latency);
  return base_->Stat(path, beneath);
}

}  // namespace stoker
