// Daemon: who may do what. Tokens prove a caller's uid (issued over the
// ring handoff socket to the peer SO_PEERCRED names); admins are root, the
// daemon's own user and members of the admin group.
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "server/daemon.h"
#include "server/token.h"

namespace stoker {

bool Daemon::IsAdmin(uid_t uid) const {
  if (uid == 0 || uid == geteuid()) return true;
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

absl::Status Daemon::RequireAdmin(const Caller& caller, const char* what) {
  if (caller.admin) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      what, " is for admins (root, the daemon's user, or its --admin-group); "
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
  uint64_t total = ring_bytes;
  uint32_t mine = 0;
  for (const auto& [id, e] : sessions_) {
    total += e.session->ring().layout().segment_bytes;
    mine += e.owner_uid == caller.uid;
  }
  if (options_.max_ring_bytes > 0 && total > options_.max_ring_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the node's rings would take ", total >> 20, " MiB, over the daemon's "
        "--max-ring-bytes of ", options_.max_ring_bytes >> 20,
        " MiB: use fewer ring slots or a smaller batch, or close a session"));
  }
  if (caller.uid >= 0 && !caller.admin && options_.max_sessions_per_user > 0 &&
      mine >= options_.max_sessions_per_user) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "uid ", caller.uid, " already has ", mine, " open sessions, the "
        "daemon's --max-sessions-per-user"));
  }
  return absl::OkStatus();
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
