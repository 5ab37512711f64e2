#include "shm/server_trust.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stoker::shm {

namespace {

std::optional<uid_t> UidOfName(const std::string& name) {
  long size = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(size > 0 ? static_cast<size_t>(size) : 16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  if (getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return std::nullopt;
  }
  return found->pw_uid;
}

}  // namespace

bool TrustedDaemons::Trusts(uid_t uid) const {
  return uid == 0 || uid == real || uid == effective || (service && *service == uid);
}

std::string TrustedDaemons::Describe() const {
  std::string out = absl::StrCat("root, this user (uid ", real, ")");
  if (service) {
    absl::StrAppend(&out, " or the node service's user ", service_name, " (uid ", *service, ")");
  } else {
    absl::StrAppend(&out, "; no node service's user is known (STOKER_DAEMON_USER unset, no `",
                    kServiceUser, "` account)");
  }
  return out;
}

absl::StatusOr<TrustedDaemons> TrustedDaemonsFromEnvironment(
    const std::function<const char*(const char*)>& getenv,
    const std::function<std::optional<uid_t>(const std::string&)>& uid_of) {
  const auto env = getenv ? getenv : [](const char* name) { return std::getenv(name); };
  const auto lookup = uid_of ? uid_of : UidOfName;
  TrustedDaemons t;
  t.real = getuid();
  t.effective = geteuid();
  const char* named = env("STOKER_DAEMON_USER");
  if (named != nullptr && *named != '\0') {
    const std::string name = named;
    uint32_t uid = 0;
    if (absl::SimpleAtoi(name, &uid) && absl::ascii_isdigit(name[0]) && uid != UINT32_MAX) {
      t.service = static_cast<uid_t>(uid);
    } else {
      t.service = lookup(name);
      if (!t.service) {
        return absl::FailedPreconditionError(absl::StrCat(
            "STOKER_DAEMON_USER names ", name,
            ", which is no user here: name the node service's account or its numeric uid"));
      }
    }
    t.service_name = name;
    return t;
  }
  t.service = lookup(kServiceUser);
  if (t.service) t.service_name = kServiceUser;
  return t;
}

absl::Status CheckServer(const std::string& path, uid_t folder_owner, mode_t folder_mode,
                         uid_t server_uid, const TrustedDaemons& trusted) {
  if ((folder_mode & 022) != 0 || !trusted.Trusts(folder_owner)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the folder of socket %s belongs to uid %d (mode %04o), but a daemon's folder must "
        "belong to %s and be writable by no one else: refusing to talk to a daemon there",
        path, folder_owner, folder_mode & 07777, trusted.Describe()));
  }
  if (!trusted.Trusts(server_uid)) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "the server on %s runs as uid %d, not as %s: refusing to talk to it (an "
        "operator names the node service's user in STOKER_DAEMON_USER)",
        path, server_uid, trusted.Describe()));
  }
  return absl::OkStatus();
}

}  // namespace stoker::shm
