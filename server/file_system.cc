#include "server/file_system.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "util/status_macros.h"

namespace stoker {
namespace {

FileVersion VersionOf(const struct stat& st) {
  return FileVersion{static_cast<uint64_t>(st.st_size),
                     static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 +
                         st.st_mtim.tv_nsec};
}

class PosixFileSystem : public FileSystem {
 public:
  absl::Status ReadFile(const std::string& path, std::string* contents,
                        FileVersion* version) override {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(errno, path);
    absl::Status s = ReadOpen(fd, path, contents, version);
    close(fd);
    return s;
  }

  absl::StatusOr<FileVersion> Stat(const std::string& path) override {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, path);
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
                                                FileVersion* version) {
  reads.fetch_add(1, std::memory_order_relaxed);
  if (latency > absl::ZeroDuration()) absl::SleepFor(latency);
  if (!fail_substring.empty() && absl::StrContains(path, fail_substring)) {
    return absl::UnavailableError(absl::StrCat(path, ": injected read error"));
  }
  absl::Status s = base_->ReadFile(path, contents, version);
  if (s.ok() && short_read_bytes >= 0 &&
      contents->size() > static_cast<size_t>(short_read_bytes)) {
    contents->resize(static_cast<size_t>(short_read_bytes));
  }
  return s;
}

absl::StatusOr<FileVersion> FaultInjectingFileSystem::Stat(
    const std::string& path) {
  stats.fetch_add(1, std::memory_order_relaxed);
  if (latency > absl::ZeroDuration()) absl::SleepFor(latency);
  return base_->Stat(path);
}

}  // namespace stoker
