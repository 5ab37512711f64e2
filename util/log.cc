#include "util/log.h"

#include <unistd.h>

#include <atomic>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace stoker {
namespace {
std::atomic<int> min_level{static_cast<int>(LogLevel::kInfo)};
}  // namespace

void SetMinLogLevel(LogLevel level) {
  min_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

void Log(LogLevel level, absl::string_view message) {
  if (static_cast<int>(level) < min_level.load(std::memory_order_relaxed)) {
    return;
  }
  const char* tag = level == LogLevel::kInfo      ? "I"
                    : level == LogLevel::kWarning ? "W"
                                                  : "E";
  std::string line = absl::StrCat(
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()),
      " ", tag, " stoker[", getpid(), "] ", message, "\n");
  (void)!write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace stoker
