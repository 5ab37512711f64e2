#include "server/access/authorizer.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/spec_util.h"
#include "server/access/token.h"
#include "shm/open_channel.h"
#include "util/status_macros.h"

namespace stoker {

Authorizer::Authorizer(bool required, int64_t admin_gid)
    : required_(required), admin_gid_(admin_gid) {}

Authorizer::~Authorizer() {
  absl::MutexLock lock(&mu_);
  for (auto& [token, root] : roots_) Close(root);
}

void Authorizer::Close(const Root& root) {
  if (root.fd >= 0) close(root.fd);
  if (root.channel_fd >= 0) close(root.channel_fd);
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

std::string Authorizer::RegisterRoot(int fd, int channel_fd, uid_t uid) {
  const absl::Time now = absl::Now();
  std::string token = RandomToken();
  absl::MutexLock lock(&mu_);
  size_t mine = 0;
  auto oldest = roots_.end();
  for (auto it = roots_.begin(); it != roots_.end();) {
    if (it->second.expires < now) {
      Close(it->second);
      roots_.erase(it++);
      continue;
    }
    if (it->second.uid == uid) {
      ++mine;
      if (oldest == roots_.end() || it->second.expires < oldest->second.expires) oldest = it;
    }
    ++it;
  }
  if (mine >= kMaxPendingRootsPerUser) {  // This user's flood evicts only its own.
    Close(oldest->second);
    roots_.erase(oldest);
  } else if (roots_.size() >= kMaxPendingRoots) {
    // Many uids at once (a user namespace's range): the biggest holder
    // gives back its oldest.
    absl::flat_hash_map<uid_t, size_t> held;
    uid_t most = uid;
    for (const auto& [t, r] : roots_) {
      if (++held[r.uid] > held[most]) most = r.uid;
    }
    auto victim = roots_.end();
    for (auto it = roots_.begin(); it != roots_.end(); ++it) {
      if (it->second.uid == most &&
          (victim == roots_.end() || it->second.expires < victim->second.expires)) {
        victim = it;
      }
    }
    if (victim != roots_.end()) {
      Close(victim->second);
      roots_.erase(victim);
    }
  }
  roots_[token] = Root{fd, channel_fd, uid, now + absl::Minutes(1)};
  return token;
}

absl::StatusOr<std::shared_ptr<Beneath>> Authorizer::Confine(
    const v1::DatasetSpec& spec, const Caller& caller) {
  if (caller.admin || !required_) return std::shared_ptr<Beneath>();
  const std::string dir = DatasetFolder(spec);
  if (DatasetLocation(spec).second == std::string("url") && DatasetPath(spec).empty()) {
    // A source that names what it reads by URL (an object store), and no
    // local file (a manifest): confined to no folder, so no local file
    // opens through it.
    return std::make_shared<Beneath>();
  }
  Root root;
  std::shared_ptr<const FileGuard> guard;
  {
    absl::MutexLock lock(&mu_);
    guard = guard_;
    auto it = roots_.find(spec.root_token());
    if (it != roots_.end() && it->second.uid == caller.uid) {
      root = it->second;
      roots_.erase(it);
    }
  }
  auto confined = std::make_shared<Beneath>();
  confined->dir_fd = root.fd;  // Both closed with `confined` from here on.
  confined->opener =
      root.channel_fd >= 0 ? Channel(root.channel_fd, shm::OpenChannel::kDefaultTimeout) : nullptr;
  confined->prefix = dir;
  if (root.fd < 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "uid ", caller.uid, " has not shown it can open the dataset folder ",
        dir, " (the client hands it over on the ring socket)"));
  }
  // Opened for reading, which needs the folder's read permission; an O_PATH
  // descriptor can be had for a folder one may not list.
  const int fl = fcntl(root.fd, F_GETFL);
  struct stat given {};
  if (fl < 0 || (fl & O_PATH) != 0 || fstat(root.fd, &given) != 0 || !S_ISDIR(given.st_mode)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the descriptor for ", dir, " must be a folder opened for reading, not O_PATH"));
  }
  // Every file beneath it is opened by the caller's side, with its rights.
  auto option = [fd = root.channel_fd](int name) {
    int value = -1;
    socklen_t len = sizeof(value);
    return fd >= 0 && getsockopt(fd, SOL_SOCKET, name, &value, &len) == 0 ? value : -1;
  };
  if (option(SO_TYPE) != SOCK_SEQPACKET || option(SO_DOMAIN) != AF_UNIX) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the client did not hand over an opener for ", dir,
        " (a Unix SOCK_SEQPACKET socket): this daemon opens a caller's files only through "
        "the caller's own client"));
  }
  // The folder itself may not be one of the daemon's (/dev/shm, its cache
  // or socket folder); what lies beneath is checked at every open. Which
  // folder the client opened is its own business: every path is resolved
  // in it (shm::OpenInFolder), by the client, with the client's rights.
  confined->guard = guard;
  if (guard != nullptr) STOKER_RETURN_IF_ERROR(guard->Check(given, dir));
  return confined;
}

absl::StatusOr<std::shared_ptr<shm::OpenChannel>> Authorizer::TakeSigner(
    const std::string& token, int64_t uid) {
  Root root;
  {
    absl::MutexLock lock(&mu_);
    auto it = roots_.find(token);
    if (it != roots_.end() && it->second.fd < 0 && int64_t{it->second.uid} == uid) {
      root = it->second;
      roots_.erase(it);
    }
  }
  auto option = [fd = root.channel_fd](int name) {
    int value = -1;
    socklen_t len = sizeof(value);
    return fd >= 0 && getsockopt(fd, SOL_SOCKET, name, &value, &len) == 0 ? value : -1;
  };
  if (option(SO_TYPE) != SOCK_SEQPACKET || option(SO_DOMAIN) != AF_UNIX) {
    Close(root);
    return absl::UnauthenticatedError(
        "the session brought no signer of its object store requests (the client hands one "
        "over on the ring socket; this daemon never takes a trainer's secret)");
  }
  // Longer than the client may take to refresh its credentials (a
  // credential_process runs up to 60 s) while it signs.
  return Channel(root.channel_fd, kSignerTimeout);
}

std::shared_ptr<shm::OpenChannel> Authorizer::Channel(int fd, absl::Duration timeout) {
  auto channel = std::make_shared<shm::OpenChannel>(fd, timeout);
  absl::MutexLock lock(&mu_);
  if (stopping_) {
    channel->Cancel("the daemon is stopping");
    return channel;
  }
  channels_.Add(channel);
  return channel;
}

void Authorizer::Stop() {
  std::vector<std::shared_ptr<shm::OpenChannel>> channels;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    channels = channels_.TakeLive();
  }
  for (const auto& channel : channels) channel->Cancel("the daemon is stopping");
}

absl::Status Authorizer::RequireAdmin(const Caller& caller, const char* what) {
  if (caller.admin) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      what, " is for admins (the daemon's user or its --admin-group); "
      "uid ", caller.uid, " is none"));
}

}  // namespace stoker
