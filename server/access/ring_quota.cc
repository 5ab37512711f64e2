#include "server/access/ring_quota.h"

#include "absl/strings/str_cat.h"

namespace stoker {

absl::Status RingQuota::Reserve(const Caller& caller, uint64_t id, uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  uint64_t total = bytes, mine_bytes = bytes;
  uint32_t mine = 0;
  for (const auto& [other, h] : held_) {
    if (other == id) continue;
    total += h.bytes;
    if (h.uid == caller.uid) {
      ++mine;
      mine_bytes += h.bytes;
    }
  }
  const bool limited = caller.uid >= 0 && !caller.admin;
  if (limited && limits_.bytes_per_user > 0 && mine_bytes > limits_.bytes_per_user) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "uid ", caller.uid, "'s rings would take ", mine_bytes >> 20, " MiB, over the "
        "daemon's --max-ring-bytes-per-user of ", limits_.bytes_per_user >> 20,
        " MiB: use fewer ring slots or a smaller batch, or close a session"));
  }
  if (limits_.bytes > 0 && total > limits_.bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the node's rings would take ", total >> 20, " MiB, over the daemon's "
        "--max-ring-bytes of ", limits_.bytes >> 20,
        " MiB: use fewer ring slots or a smaller batch, or close a session"));
  }
  if (limited && limits_.sessions_per_user > 0 && mine >= limits_.sessions_per_user) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "uid ", caller.uid, " already has ", mine, " open sessions, the "
        "daemon's --max-sessions-per-user"));
  }
  held_[id] = Held{caller.uid, bytes};
  return absl::OkStatus();
}

void RingQuota::SetOwner(uint64_t id, int64_t uid) {
  absl::MutexLock lock(&mu_);
  auto it = held_.find(id);
  if (it != held_.end()) it->second.uid = uid;
}

void RingQuota::Release(uint64_t id) {
  absl::MutexLock lock(&mu_);
  held_.erase(id);
}

uint64_t RingQuota::bytes() const {
  absl::MutexLock lock(&mu_);
  uint64_t n = 0;
  for (const auto& [id, h] : held_) n += h.bytes;
  return n;
}

uint64_t RingQuota::bytes_of(int64_t uid) const {
  absl::MutexLock lock(&mu_);
  uint64_t n = 0;
  for (const auto& [id, h] : held_) n += h.uid == uid ? h.bytes : 0;
  return n;
}

}  // namespace stoker
