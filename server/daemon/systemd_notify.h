// Readiness and stop notifications to systemd (Type=notify units), through
// libsystemd's sd_notify, loaded at run time only when systemd asked for
// notifications ($NOTIFY_SOCKET set): the daemon neither links nor bundles
// libsystemd, and does nothing outside systemd. Thread-safe; never fails
// the caller (a notification that cannot be sent is logged).
#ifndef STOKER_SERVER_DAEMON_SYSTEMD_NOTIFY_H_
#define STOKER_SERVER_DAEMON_SYSTEMD_NOTIFY_H_

#include <string>

namespace stoker {

// Sends `state` (e.g. "READY=1\nSTATUS=serving", "STOPPING=1"). Returns
// true if systemd was told, false when not under systemd or on failure.
bool NotifySystemd(const std::string& state);

}  // namespace stoker

#endif  // STOKER_SERVER_DAEMON_SYSTEMD_NOTIFY_H_
