// Which failed samples a session writes to the daemon's log: each path once
// (a bad file read every epoch does not flood the log), at most
// `max_logged` paths; past that, one line says that the rest are counted
// (stokerctl stats, the session's error counters), not logged. A path and
// its error are written quoted, their control bytes, backslashes and
// quotes escaped (\n, \x1b, \"): a user's name that holds a newline or a
// terminal's escape writes no line, nor control, of its own.
//
// What it keeps is bounded and is the session's own: a 64-bit hash per
// path logged (never the path: a user's 4 KiB names cost the daemon 8
// bytes each), at most `max_logged` of them, freed with the session. Two
// paths with one hash log once; both are still counted.
//
// Thread-safe.
#ifndef STOKER_SERVER_SERVE_SAMPLE_ERROR_LOG_H_
#define STOKER_SERVER_SERVE_SAMPLE_ERROR_LOG_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace stoker {

class SampleErrorLog {
 public:
  static constexpr size_t kMaxLogged = 1000;

  // `owner` names whose samples these are in each line ("session 7");
  // `sink` (tests) takes each line instead of the daemon's log.
  explicit SampleErrorLog(std::string owner, size_t max_logged = kMaxLogged,
                          std::function<void(const std::string&)> sink = nullptr);

  void Report(const std::string& path, const absl::Status& status);

  size_t kept() const;  // Paths remembered (tests).

 private:
  const std::string owner_;
  const size_t max_logged_;
  const std::function<void(const std::string&)> sink_;
  mutable absl::Mutex mu_;
  absl::flat_hash_set<uint64_t> seen_ ABSL_GUARDED_BY(mu_);
  bool capped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace stoker

#endif  // STOKER_SERVER_SERVE_SAMPLE_ERROR_LOG_H_
