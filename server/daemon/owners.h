// The processes an embedded daemon serves: one pid (--exit-with-pid) or a
// folder of files named by pids (--owners-dir, the Python package's shared
// daemon). When none is left alive, the daemon shuts itself down.
// Thread-safe (it touches only the owners' folder).
#ifndef STOKER_SERVER_DAEMON_OWNERS_H_
#define STOKER_SERVER_DAEMON_OWNERS_H_

#include <string>

namespace stoker {

// True while `pid` (if > 0) or a process listed in `dir` (if set) lives;
// removes the files of dead ones and ignores names that are no pid.
bool OwnersAlive(int pid, const std::string& dir);
// With an owner to watch, a detached thread that sends this process
// SIGTERM once no owner is alive (checked every 200 ms); else nothing.
void ExitWithOwners(int pid, const std::string& dir);

}  // namespace stoker

#endif  // STOKER_SERVER_DAEMON_OWNERS_H_
