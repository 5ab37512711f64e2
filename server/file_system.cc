#include "server/file_system.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "util/status_macros.h"

namespace stoker {

absl::StatusOr<int> OpenConfined(const std::string& path, uint64_t flags,
                                 const Beneath* beneath) {
  if (beneath == nullptr) {
    int fd = open(path.c_str(), static_cast<int>(flags) | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(errno, path);
    return fd;
  }
  const std::string& pre = beneath->prefix;
  if (path.size() <= pre.size() + 1 || path.compare(0, pre.size(), pre) != 0 ||
      path[pre.size()] != '/') {
    return absl::PermissionDeniedError(
        absl::StrCat(path, " is outside the dataset folder ", pre));
  }
  struct open_how how {};
  how.flags = flags | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  const std::string rel = path.substr(pre.size() + 1);
  long fd = syscall(SYS_openat2, beneath->dir_fd, rel.c_str(), &how, sizeof(how));
  if (fd < 0 && errno == EXDEV) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, " leads outside the dataset folder ", pre));
  }
  if (fd < 0) return ErrnoStatus(errno, path);
  return static_cast<int>(fd);
}

namespace {

FileVersion VersionOf(const struct stat& st) {
  return FileVersion{static_cast<uint64_t>(st.st_size),
                     static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 +
                         st.st_mtim.tv_nsec};
}

class PosixFileSystem : public FileSystem {
 public:
  absl::Status ReadFile(const std::string& path, std::string* contents,
                        FileVersion* version, const Beneath* beneath) override {
    STOKER_ASSIGN_OR_RETURN(int fd, OpenConfined(path, O_RDONLY, beneath));
    absl::Status s = ReadOpen(fd, path, contents, version);
    close(fd);
    return s;
  }

  absl::StatusOr<FileVersion> Stat(const std::string& path,
                                   const Beneath* beneath) override {
    STOKER_ASSIGN_OR_RETURN(int fd, OpenConfined(path, O_PATH, beneath));
    struct stat st;
    const int rc = fstat(fd, &st);
    const int err = errno;
    close(fd);
    if (rc != 0) return ErrnoStatus(err, path);
    return VersionOf(st);
  }

 private:
  static absl::Status ReadOpen(int fd, const std::string& path,
                               std::string* contents, FileVersion* version) {
    struct stat st;
    if (fstat(fd, &st) != 0) return ErrnoStatus(errno, path);
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
                                                const Beneath* beneath) {
  reads.fetch_add(1, std::memory_order_relaxed);
  if (latency > absl::ZeroDuration()) absl::SleepFor(latency);
  if (!fail_substring.empty() && absl::StrContains(path, fail_substring)) {
    return absl::UnavailableError(absl::StrCat(path, ": injected read error"));
  }
  absl::Status s = base_->ReadFile(path, contents, version, beneath);
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
