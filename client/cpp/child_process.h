// Runs a helper program, as the AWS SDKs run a profile's
// credential_process, from a process with many threads (a trainer): the
// command line is split as POSIX shells quote it (Python's shlex.split:
// whitespace separates words; '...' keeps everything; "..." keeps all but
// \" and \\; a backslash outside quotes keeps the next character) and run
// without a shell by posix_spawnp (PATH searched, no fork of the caller),
// with the caller's environment, stdin from /dev/null, SIGPIPE and SIGXFSZ
// back to their defaults, no signal blocked, in a session (and process
// group) of its own, with no controlling terminal: a helper that prompts
// on /dev/tty fails at once in its own words instead of being stopped. Its stdout is collected up to a cap, its stderr up to a smaller one
// (the rest read and dropped); past the timeout, or past the stdout cap,
// its whole group is killed with SIGKILL.
//
// Stateless; thread-safe (each call waits for its own child only).
#ifndef STOKER_CLIENT_CPP_CHILD_PROCESS_H_
#define STOKER_CLIENT_CPP_CHILD_PROCESS_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace stoker {

// The words of `command_line`; INVALID_ARGUMENT for an unclosed quote or a
// trailing backslash.
absl::StatusOr<std::vector<std::string>> SplitCommandLine(absl::string_view command_line);

struct ChildLimits {
  absl::Duration timeout = absl::Seconds(60);
  size_t max_stdout = 1 << 20;
  size_t max_stderr = 4096;
  // The child's environment ("NAME=value" each); unset: the caller's as
  // the child starts (which another thread's setenv may change under it).
  std::optional<std::vector<std::string>> environment;
};

// This process's environment now, for ChildLimits::environment.
std::vector<std::string> EnvironmentNow();

struct ChildResult {
  enum class End { kExited, kSignalled, kTimedOut, kStdoutTooLarge };
  End end = End::kExited;
  int code = 0;       // The exit status (kExited) or the signal (kSignalled).
  std::string out;    // Its stdout (complete only when it exited).
  std::string err;    // The first max_stderr bytes of its stderr.

  bool succeeded() const { return end == End::kExited && code == 0; }
  // "exited 1", "was killed by signal 9", "ran past 60s and was killed",
  // "wrote more than 1048576 bytes to stdout and was killed".
  std::string Describe(const ChildLimits& limits) const;
};

// Runs argv[0] with arguments argv[1..] until it ends (or is killed, see
// above). An error only where it could not be started: INVALID_ARGUMENT
// for an empty argv; posix_spawnp's errno otherwise (NOT_FOUND for a
// program that is not on PATH), naming argv[0].
absl::StatusOr<ChildResult> RunChild(const std::vector<std::string>& argv,
                                     const ChildLimits& limits = {});

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_CHILD_PROCESS_H_
