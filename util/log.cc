#include "util/log.h"

#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace stoker {

void Log(LogLevel level, absl::string_view message) {
  const char* tag = level == LogLevel::kInfo      ? "I"
                    : level == LogLevel::kWarning ? "W"
                                                  : "E";
  std::string line = absl::StrCat(
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()),
      " ", tag, " stoker[", getpid(), "] ", message, "\n");
  (void)!write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace stoker
