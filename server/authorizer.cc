#include "server/authorizer.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/spec_util.h"
#include "server/token.h"
#include "util/status_macros.h"

namespace stoker {

Authorizer::Authorizer(bool required, int64_t admin_gid)
    : required_(required), admin_gid_(admin_gid) {}

Authorizer::~Authorizer() {
  absl::MutexLock lock(&mu_);
  for (auto& [token, root] : roots_) close(root.fd);
}

void Authorizer::SetGuard(std::shared_ptr<const FileGuard> guard) {
  absl::MutexLock lock(&mu_);
  guard_ = std::move(guard);
}

bool Authorizer::IsAdmin(uid_t uid) const {
  if (uid == geteuid()) return true;  // Not uid 0 as such (see daemon.h).
  if (admin_gid_ < 0) return false;
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || !found) {
    return false;
  }
  const gid_t admin = static_cast<gid_t>(admin_gid_);
  if (pw.pw_gid == admin) return true;
  int n = 64;
  std::vector<gid_t> groups(n);
  if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) {
    groups.resize(n);
    if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) return false;
  }
  groups.resize(n);
  for (gid_t g : groups) {
    if (g == admin) return true;
  }
  return false;
}

std::string Authorizer::IssueToken(uid_t uid) {
  const bool admin = IsAdmin(uid);  // Group membership may have changed.
  absl::MutexLock lock(&mu_);
  Token& t = tokens_[uid];
  if (t.secret.empty()) t.secret = RandomToken();
  t.admin = admin;
  return t.secret;
}

absl::StatusOr<Caller> Authorizer::Authenticate(const std::string& token) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [uid, t] : tokens_) {
    if (ConstantTimeEquals(token, t.secret)) return Caller::User(uid, t.admin);
  }
  return absl::UnauthenticatedError(
      "this call needs the caller token the daemon's ring socket "
      "(<socket>.ring) hands out; use the Stoker client library");
}

std::string Authorizer::RegisterRoot(int fd, uid_t uid) {
  const absl::Time now = absl::Now();
  std::string token = RandomToken();
  absl::MutexLock lock(&mu_);
  for (auto it = roots_.begin(); it != roots_.end();) {
    if (it->second.expires < now || roots_.size() > 1024) {
      close(it->second.fd);
      roots_.erase(it++);
    } else {
      ++it;
    }
  }
  roots_[token] = Root{fd, uid, now + absl::Minutes(1)};
  return token;
}

absl::StatusOr<std::shared_ptr<Beneath>> Authorizer::Confine(
    const v1::DatasetSpec& spec, const Caller& caller) {
  if (caller.admin || !required_) return std::shared_ptr<Beneath>();
  const std::string dir = DatasetFolder(spec);
  int fd = -1;
  std::shared_ptr<const FileGuard> guard;
  {
    absl::MutexLock lock(&mu_);
    guard = guard_;
    auto it = roots_.find(spec.root_token());
    if (it != roots_.end() && it->second.uid == caller.uid) {
      fd = it->second.fd;
      roots_.erase(it);
    }
  }
  auto confined = std::make_shared<Beneath>();
  confined->dir_fd = fd;  // Closed with `confined` from here on.
  confined->prefix = dir;
  if (fd < 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "uid ", caller.uid, " has not shown it can open the dataset folder ",
        dir, " (the client hands it over on the ring socket)"));
  }
  // Opened for reading, which needs the folder's read permission; an O_PATH
  // descriptor can be had for a folder one may not list.
  const int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || (fl & O_PATH) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the descriptor for ", dir, " must be opened for reading, not O_PATH"));
  }
  struct stat given {}, named {};
  if (fstat(fd, &given) != 0 || stat(dir.c_str(), &named) != 0 ||
      given.st_dev != named.st_dev || given.st_ino != named.st_ino) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the folder the client handed over is not ", dir));
  }
  // The folder itself may not be one of the daemon's (/dev/shm, its cache
  // or socket folder); what lies beneath is checked at every open.
  confined->guard = guard;
  if (guard != nullptr) STOKER_RETURN_IF_ERROR(guard->Check(given, dir));
  return confined;
}

absl::Status Authorizer::RequireAdmin(const Caller& caller, const char* what) {
  if (caller.admin) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      what, " is for admins (the daemon's user or its --admin-group); "
      "uid ", caller.uid, " is none"));
}

}  // namespace stoker
