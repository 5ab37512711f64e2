// Whether a process is gone: no such pid, or a zombie (exited, not yet
// reaped by its parent: its resources, rings included, are as good as
// freed). A pid of another user that is alive counts as alive. Stateless;
// thread-safe.
#ifndef STOKER_UTIL_PROCESS_H_
#define STOKER_UTIL_PROCESS_H_

#include <signal.h>
#include <sys/types.h>

#include <cerrno>
#include <cstdio>
#include <string>

namespace stoker {

inline bool ProcessGone(pid_t pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  const std::string stat = "/proc/" + std::to_string(pid) + "/stat";
  FILE* f = std::fopen(stat.c_str(), "r");
  if (f == nullptr) return false;  // No /proc view of it: assume alive.
  char state = 0;
  const int n = std::fscanf(f, "%*d (%*[^)]) %c", &state);
  std::fclose(f);
  return n == 1 && state == 'Z';
}

}  // namespace stoker

#endif  // STOKER_UTIL_PROCESS_H_
