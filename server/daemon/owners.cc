#include "server/daemon/owners.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "util/log.h"
#include "util/process.h"

namespace stoker {

bool OwnersAlive(int pid, const std::string& dir) {
  bool alive = pid > 0 && !ProcessGone(pid);
  if (dir.empty()) return alive;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    int owner = 0;
    if (!absl::SimpleAtoi(e.path().filename().string(), &owner) || owner <= 0) {
      continue;
    }
    if (!ProcessGone(owner)) {
      alive = true;
    } else {
      std::filesystem::remove(e.path(), ec);
    }
  }
  return alive;
}

void ExitWithOwners(int pid, const std::string& dir) {
  if (pid <= 0 && dir.empty()) return;
  // Detached: it only ever sends this process SIGTERM, which main handles.
  std::thread([pid, dir] {
    while (OwnersAlive(pid, dir)) absl::SleepFor(absl::Milliseconds(200));
    LogInfo("every owner process exited");
    kill(getpid(), SIGTERM);
  }).detach();
}

}  // namespace stoker
