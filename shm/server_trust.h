// Which daemons a client speaks to at all. A trainer hands the daemon its
// dataset's folder, its opener and its object-store access, so a server
// that merely answers on the socket a trainer was pointed at is not enough:
// anyone can make a folder, listen in it and relay what arrives.
//
// A client speaks only to a server whose uid, on the very connection it
// uses (SO_PEERCRED), is one of:
//   - root;
//   - this process's own (real or effective) uid: its embedded daemon;
//   - the node service's user, as the operator names it: STOKER_DAEMON_USER
//     (a user name or a numeric uid: set beside STOKER_SOCKET in the
//     trainer's pod spec or profile, where the account may not exist by
//     name), else the system account `stoker` where one exists.
// and only where the socket's folder belongs to one of those and no one
// else may write it (no group or other write bit), so no other user can
// swap the socket between the check and a later connection.
//
// Stateless; thread-safe (getpwnam_r).
#ifndef STOKER_SHM_SERVER_TRUST_H_
#define STOKER_SHM_SERVER_TRUST_H_

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace stoker::shm {

// The account the node service runs as when the operator names none.
inline constexpr char kServiceUser[] = "stoker";

struct TrustedDaemons {
  uid_t real = 0, effective = 0;   // This process's.
  std::optional<uid_t> service;    // The node service's user, if any.
  std::string service_name;        // As named ("" where none is).

  bool Trusts(uid_t uid) const;
  // "root, this user (uid 1000) or the node service's user stoker (uid
  // 9464)", for messages.
  std::string Describe() const;
};

// This process's trusted daemons. `getenv` (tests): the environment's
// lookup, null for unset; `uid_of` (tests): a user name's uid, nullopt
// for none. FAILED_PRECONDITION when STOKER_DAEMON_USER names no user.
absl::StatusOr<TrustedDaemons> TrustedDaemonsFromEnvironment(
    const std::function<const char*(const char*)>& getenv = nullptr,
    const std::function<std::optional<uid_t>(const std::string&)>& uid_of = nullptr);

// The rule above, given what the client saw: the socket `path`, its
// folder's owner and mode (lstat), and the server's uid on the connection.
// FAILED_PRECONDITION for a folder others may write or that belongs to an
// untrusted user; PERMISSION_DENIED for an untrusted server. Each message
// names the socket and the owner it found.
absl::Status CheckServer(const std::string& path, uid_t folder_owner, mode_t folder_mode,
                         uid_t server_uid, const TrustedDaemons& trusted);

}  // namespace stoker::shm

#endif  // STOKER_SHM_SERVER_TRUST_H_
