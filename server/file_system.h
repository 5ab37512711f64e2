// File access for sample reads, behind an interface so tests and benchmarks
// can inject latency, errors and short reads (LevelDB's Env pattern).
// Implementations must be thread-safe: every reader thread calls them
// concurrently.
#ifndef STOKER_SERVER_FILE_SYSTEM_H_
#define STOKER_SERVER_FILE_SYSTEM_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/dataset.h"

namespace stoker {

// What identifies one version of a file's contents.
struct FileVersion {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileVersion& o) const {
    return size == o.size && mtime_ns == o.mtime_ns;
  }
};

// Opens `path` with `flags` (O_RDONLY or O_PATH; O_CLOEXEC is added),
// confined to `beneath` if set (openat2 RESOLVE_BENEATH): PERMISSION_DENIED
// for a path outside its folder or leading out of it. The caller closes
// the descriptor.
absl::StatusOr<int> OpenConfined(const std::string& path, uint64_t flags,
                                 const Beneath* beneath);

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // Replaces *contents with the whole file and sets *version (if not null)
  // from the open file. NOT_FOUND, PERMISSION_DENIED, DATA_LOSS (the file
  // shrank while being read) or INTERNAL, each naming the path. With
  // `beneath`, PERMISSION_DENIED for a path that leads outside its folder.
  virtual absl::Status ReadFile(const std::string& path, std::string* contents,
                                FileVersion* version,
                                const Beneath* beneath = nullptr) = 0;

  // Size and modification time, without reading.
  virtual absl::StatusOr<FileVersion> Stat(const std::string& path,
                                           const Beneath* beneath = nullptr) = 0;

  // The process-wide POSIX implementation; never deleted.
  static FileSystem* Default();
};

// Wraps another FileSystem, counting calls and optionally adding latency to
// every read and stat, failing reads of paths containing `fail_substring`,
// or truncating every read to `short_read_bytes`. For tests and benchmarks.
// Thread-safe; the options may be changed between (not during) reads.
class FaultInjectingFileSystem : public FileSystem {
 public:
  explicit FaultInjectingFileSystem(FileSystem* base) : base_(base) {}

  absl::Status ReadFile(const std::string& path, std::string* contents,
                        FileVersion* version,
                        const Beneath* beneath = nullptr) override;
  absl::StatusOr<FileVersion> Stat(const std::string& path,
                                   const Beneath* beneath = nullptr) override;

  absl::Duration latency = absl::ZeroDuration();
  std::string fail_substring;  // Empty: never fail.
  int64_t short_read_bytes = -1;

  std::atomic<uint64_t> reads{0};
  std::atomic<uint64_t> stats{0};

 private:
  FileSystem* const base_;
};

}  // namespace stoker

#endif  // STOKER_SERVER_FILE_SYSTEM_H_
