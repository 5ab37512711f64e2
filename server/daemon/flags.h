// stokerd's command line: its flags (written with dashes, sizes with
// units: flag_types.h), and what they configure, checked. ParseFlags reads
// argv once; Config() turns the parsed flags into a StokerdConfig, or
// INVALID_ARGUMENT naming the flag. Not thread-safe (absl flags are
// process-wide): call from main before any thread starts.
#ifndef STOKER_SERVER_DAEMON_FLAGS_H_
#define STOKER_SERVER_DAEMON_FLAGS_H_

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"
#include "server/daemon/options.h"

namespace stoker {

struct StokerdConfig {
  DaemonOptions daemon;
  std::string socket;              // The control socket's path.
  mode_t socket_mode = 0660;       // Both sockets'.
  std::string metrics_address;     // host:port; empty: no /metrics.
  std::string hdf5_reader;         // Empty: the default program.
  int exit_with_pid = 0;           // Shut down when it exits; 0: never.
  std::string owners_dir;          // Shut down when none is left; empty: no.
  bool allow_root = false;
  bool allow_core_dumps = false;   // Else not dumpable (PR_SET_DUMPABLE 0).
};

// Parses argv (either spelling); true when --help or --version was asked
// for and printed, and the program should exit 0.
bool ParseFlags(int argc, char** argv);
// The parsed flags as a configuration, defaults filled in from the
// machine (ring budgets from its memory, the handoff socket beside the
// control socket); FAILED_PRECONDITION for root without --allow-root (or an
// owner to serve), then INVALID_ARGUMENT naming the flag for a bad value.
absl::StatusOr<StokerdConfig> Config();

}  // namespace stoker

#endif  // STOKER_SERVER_DAEMON_FLAGS_H_
