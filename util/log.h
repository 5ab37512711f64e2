// Minimal process-wide logging to stderr: one line per call, prefixed with
// a UTC timestamp, severity and pid. Thread-safe (one write(2) per line).
#ifndef STOKER_UTIL_LOG_H_
#define STOKER_UTIL_LOG_H_

#include "absl/strings/string_view.h"

namespace stoker {

enum class LogLevel { kInfo, kWarning, kError };

void Log(LogLevel level, absl::string_view message);

inline void LogInfo(absl::string_view m) { Log(LogLevel::kInfo, m); }
inline void LogWarning(absl::string_view m) { Log(LogLevel::kWarning, m); }
inline void LogError(absl::string_view m) { Log(LogLevel::kError, m); }

// Lines below this level are dropped (default kInfo).
void SetMinLogLevel(LogLevel level);

}  // namespace stoker

#endif  // STOKER_UTIL_LOG_H_
