#include "server/file_system.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

namespace stoker {
namespace {

class PosixFileSystem : public FileSystem {
 public:
  absl::Status ReadFile(const std::string& path,
                        std::string* contents) override {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(errno, path);
    struct stat st;
    if (fstat(fd, &st) != 0) {
      int e = errno;
      close(fd);
      return ErrnoStatus(e, path);
    }
    contents->resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < contents->size()) {
      ssize_t n = pread(fd, contents->data() + done, contents->size() - done,
                        static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int e = errno;
        close(fd);
        return ErrnoStatus(e, path);
      }
      if (n == 0) {
        close(fd);
        return absl::DataLossError(absl::StrCat(
            path, ": file shrank while reading (", done, " of ",
            contents->size(), " bytes)"));
      }
      done += static_cast<size_t>(n);
    }
    close(fd);
    return absl::OkStatus();
  }
};

}  // namespace

FileSystem* FileSystem::Default() {
  static FileSystem* fs = new PosixFileSystem;
  return fs;
}

}  // namespace stoker
