// Daemon: who may do what. Tokens prove a caller's uid (issued over the
// ring handoff socket to the peer SO_PEERCRED names); admins are the
// daemon's own user and members of the admin group.
#include <grp.h>
#include <pwd.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>


#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/spec_util.h"
#include "server/daemon.h"
#include "server/token.h"
#include "util/status_macros.h"

namespace stoker {

bool Daemon::IsAdmin(uid_t uid) const {
  if (uid == geteuid()) return true;  // Not uid 0 as such (see daemon.h).
  if (options_.admin_gid < 0) return false;
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || !found) {
    return false;
  }
  const gid_t admin = static_cast<gid_t>(options_.admin_gid);
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

std::string Daemon::IssueToken(uid_t uid) {
  const bool admin = IsAdmin(uid);  // Group membership may have changed.
  absl::MutexLock lock(&auth_mu_);
  Token& t = tokens_[uid];
  if (t.secret.empty()) t.secret = RandomToken();
  t.admin = admin;
  return t.secret;
}

absl::StatusOr<Caller> Daemon::Authenticate(const std::string& token) const {
  absl::MutexLock lock(&auth_mu_);
  for (const auto& [uid, t] : tokens_) {
    if (ConstantTimeEquals(token, t.secret)) return Caller::User(uid, t.admin);
  }
  return absl::UnauthenticatedError(
      "this call needs the caller token the daemon's ring socket "
      "(<socket>.ring) hands out; use the Stoker client library");
}

std::string Daemon::RegisterRoot(int fd, uid_t uid) {
  const absl::Time now = absl::Now();
  std::string token = RandomToken();
  absl::MutexLock lock(&auth_mu_);
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

absl::StatusOr<std::shared_ptr<Beneath>> Daemon::Confinement(
    const v1::DatasetSpec& spec, const Caller& caller) {
  if (caller.admin || !auth_required()) return std::shared_ptr<Beneath>();
  const std::string dir = DatasetFolder(spec);
  int fd = -1;
  {
    absl::MutexLock lock(&auth_mu_);
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
  confined->guard = guard_;
  STOKER_RETURN_IF_ERROR(guard_->Check(given, dir));
  return confined;
}

std::shared_ptr<const FileGuard> Daemon::MakeGuard() const {
  auto g = std::make_shared<FileGuard>();
  if (geteuid() != 0) g->daemon_uid = geteuid();
  struct stat st {};
  if (stat("/dev/shm", &st) == 0) g->devices.push_back(st.st_dev);
  auto add = [&](const std::string& path) {
    if (!path.empty() && stat(path.c_str(), &st) == 0) {
      g->inodes.emplace_back(st.st_dev, st.st_ino);
    }
  };
  if (!options_.l2.path.empty()) {
    add(options_.l2.path);
    add(options_.l2.path + "/data.mdb");
    add(options_.l2.path + "/lock.mdb");
  }
  if (!options_.handoff_socket.empty()) {
    const size_t slash = options_.handoff_socket.rfind('/');
    if (slash != std::string::npos && slash > 0) add(options_.handoff_socket.substr(0, slash));
  }
  return g;
}

absl::Status Daemon::RequireAdmin(const Caller& caller, const char* what) {
  if (caller.admin) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      what, " is for admins (the daemon's user or its --admin-group); "
      "uid ", caller.uid, " is none"));
}

absl::StatusOr<v1::DescribeSamplesResponse> Daemon::DescribeSamples(
    const v1::DescribeSamplesRequest& request, const Caller& caller) {
  if (request.indices_size() > 1024) {
    return absl::InvalidArgumentError("at most 1024 indices per call");
  }
  std::shared_ptr<const Dataset> dataset;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(request.session_id());
    if (it == sessions_.end()) {
      return absl::NotFoundError(absl::StrCat("no session ", request.session_id()));
    }
    if (!caller.admin && it->second.owner_uid != caller.uid) {
      return absl::PermissionDeniedError(absl::StrCat(
          "session ", request.session_id(), " belongs to another user"));
    }
    dataset = it->second.session->shared_dataset();
  }
  v1::DescribeSamplesResponse resp;
  for (uint64_t index : request.indices()) {
    if (index >= dataset->samples.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sample index ", index, " is outside the dataset's ",
          dataset->samples.size(), " samples"));
    }
    resp.add_paths(dataset->samples[index].path);
  }
  return resp;
}

absl::Status Daemon::CheckQuotas(const Caller& caller, uint64_t ring_bytes) const {
  uint64_t total = ring_bytes, my_bytes = ring_bytes;
  uint32_t mine = 0;
  auto count = [&](int64_t uid, uint64_t bytes) {
    total += bytes;
    if (uid == caller.uid) {
      ++mine;
      my_bytes += bytes;
    }
  };
  for (const auto& [id, e] : sessions_) {
    count(e.owner_uid, e.session->ring().layout().segment_bytes);
  }
  for (const Reservation& r : reserved_) count(r.uid, r.bytes);
  const bool limited = caller.uid >= 0 && !caller.admin;
  if (limited && options_.max_ring_bytes_per_user > 0 &&
      my_bytes > options_.max_ring_bytes_per_user) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "uid ", caller.uid, "'s rings would take ", my_bytes >> 20, " MiB, over the "
        "daemon's --max-ring-bytes-per-user of ", options_.max_ring_bytes_per_user >> 20,
        " MiB: use fewer ring slots or a smaller batch, or close a session"));
  }
  if (options_.max_ring_bytes > 0 && total > options_.max_ring_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the node's rings would take ", total >> 20, " MiB, over the daemon's "
        "--max-ring-bytes of ", options_.max_ring_bytes >> 20,
        " MiB: use fewer ring slots or a smaller batch, or close a session"));
  }
  if (limited && options_.max_sessions_per_user > 0 &&
      mine >= options_.max_sessions_per_user) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "uid ", caller.uid, " already has ", mine, " open sessions, the "
        "daemon's --max-sessions-per-user"));
  }
  return absl::OkStatus();
}

absl::Status Daemon::Reserve(const Caller& caller, uint64_t session_id,
                             uint64_t ring_bytes) {
  absl::MutexLock lock(&mu_);
  STOKER_RETURN_IF_ERROR(CheckQuotas(caller, ring_bytes));
  reserved_.push_back(Reservation{session_id, caller.uid, ring_bytes});
  return absl::OkStatus();
}

void Daemon::Unreserve(uint64_t session_id) {
  reserved_.erase(std::remove_if(reserved_.begin(), reserved_.end(),
                                 [&](const Reservation& r) { return r.id == session_id; }),
                  reserved_.end());
}

v1::SessionStats Daemon::VisibleStats(const Entry& e, const Caller& caller) const {
  v1::SessionStats s = EntryStats(e);
  if (!caller.admin && e.owner_uid != caller.uid) {
    s.set_dataset("(another user's session)");
    s.set_client_pid(0);
  }
  return s;
}

}  // namespace stoker
