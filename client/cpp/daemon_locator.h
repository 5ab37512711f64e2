// Which daemon a trainer or stokerctl uses when its code or command line
// names none. One rule for the Python package (which starts the embedded
// daemon where this says so) and stokerctl (which only finds one):
//   1. $STOKER_SOCKET: that socket, which must answer (UNAVAILABLE naming
//      it otherwise: a named daemon is never silently replaced); the value
//      "embedded" names this user's embedded daemon;
//   2. else the node's daemon at kNodeSocket, if one answers there;
//   3. else this user's embedded daemon: stoker.sock in
//      $STOKER_EMBEDDED_DIR (default /tmp/stoker-embedded-<uid>), its log
//      stokerd.log there (the last runs' as stokerd.log.1 ...). Whether it
//      runs is the caller's to see.
// Stateless; thread-safe.
#ifndef STOKER_CLIENT_CPP_DAEMON_LOCATOR_H_
#define STOKER_CLIENT_CPP_DAEMON_LOCATOR_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "client/cpp/aws_profile.h"

namespace stoker {

inline constexpr char kNodeSocket[] = "/run/stoker/stoker.sock";
inline constexpr char kEmbeddedName[] = "embedded";  // $STOKER_SOCKET's value.

struct DaemonLocation {
  std::string socket;
  bool embedded = false;  // This user's embedded daemon (running or not).
  std::string log;        // Its log (embedded only).
  std::string Describe() const;  // In words, for messages.
};

// Whether something listens on the Unix socket at `path` (one whose
// backlog is full counts: a busy daemon). Never waits.
bool SocketAnswers(const std::string& path);

// The rule above; `getenv` (null: the process's), `answers` (null:
// SocketAnswers) and `uid` are injected by tests.
absl::StatusOr<DaemonLocation> LocateDaemon(
    const Getenv& getenv = nullptr,
    const std::function<bool(const std::string&)>& answers = nullptr, long uid = -1);

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_DAEMON_LOCATOR_H_
