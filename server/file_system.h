// File access for sample reads, behind an interface so tests can inject
// latency, errors and short reads (LevelDB's Env pattern). Implementations
// must be thread-safe: every decode/read thread calls them concurrently.
#ifndef STOKER_SERVER_FILE_SYSTEM_H_
#define STOKER_SERVER_FILE_SYSTEM_H_

#include <string>

#include "absl/status/status.h"

namespace stoker {

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // Replaces *contents with the whole file. NOT_FOUND, PERMISSION_DENIED,
  // DATA_LOSS (the file shrank while being read) or INTERNAL, each naming
  // the path.
  virtual absl::Status ReadFile(const std::string& path,
                                std::string* contents) = 0;

  // The process-wide POSIX implementation; never deleted.
  static FileSystem* Default();
};

}  // namespace stoker

#endif  // STOKER_SERVER_FILE_SYSTEM_H_
