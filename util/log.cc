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
      " ", tag, " stoker[", getpid(), "] ");
  // One record, one line: a control byte a caller named (a file name, an
  // object key) is written as \xNN, so no one forges a line of the log.
  for (unsigned char c : message) {
    if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      line += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    } else {
      line.push_back(static_cast<char>(c));
    }
  }
  line.push_back('\n');
  (void)!write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace stoker
