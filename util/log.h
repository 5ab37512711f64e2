// Minimal process-wide logging to stderr: one line per call, prefixed with
// a UTC timestamp, severity and pid; a control byte of the message (a
// newline in a file name or object key a trainer chose) is written as
// \xNN, so a record is always one line. Thread-safe (one write(2) per
// line).
#ifndef STOKER_UTIL_LOG_H_
#define STOKER_UTIL_LOG_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "util/status_macros.h"

namespace stoker {

enum class LogLevel { kInfo, kWarning, kError };

void Log(LogLevel level, absl::string_view message);

inline void LogInfo(absl::string_view m) { Log(LogLevel::kInfo, m); }
inline void LogWarning(absl::string_view m) { Log(LogLevel::kWarning, m); }
inline void LogError(absl::string_view m) { Log(LogLevel::kError, m); }

// Runs fn() (returning void) as a thread's or task's last barrier: an
// exception it throws is logged as an error naming `where`, never ends the
// process. Returns false when one was caught.
template <typename Fn>
bool RunLoggingExceptions(absl::string_view where, Fn&& fn) {
  absl::Status s = Guarded(where, [&] {
    fn();
    return absl::OkStatus();
  });
  if (!s.ok()) LogError(s.message());
  return s.ok();
}

}  // namespace stoker

#endif  // STOKER_UTIL_LOG_H_
