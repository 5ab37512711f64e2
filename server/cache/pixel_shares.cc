#include "server/cache/pixel_shares.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stoker {
namespace {

std::string MiB(uint64_t bytes) {
  if (bytes < (10 << 20)) return absl::StrFormat("%.1f MiB", bytes / 1048576.0);
  return absl::StrCat((bytes + (1 << 20) - 1) >> 20, " MiB");
}

}  // namespace

uint64_t PixelShares::Users(int64_t also) const {
  std::set<int64_t> uids{also};
  for (const auto& [key, h] : held_) uids.insert(h.uid);
  return uids.size();
}

uint64_t PixelShares::UserBytes(int64_t uid, const std::string& except) const {
  uint64_t n = 0;
  for (const auto& [key, h] : held_) n += key != except && h.uid == uid ? h.bytes : 0;
  return n;
}

void PixelShares::Drop(std::map<std::string, Held>::iterator it) {
  it->second.claim->granted.store(false);
  held_.erase(it);
}

std::shared_ptr<const PixelShares::Claim> PixelShares::Ask(uint64_t session,
                                                           const std::string& content,
                                                           int64_t uid, uint64_t bytes,
                                                           std::string* why) {
  absl::MutexLock lock(&mu_);
  const std::string key = absl::StrCat(uid, "|", content);
  if (held_.find(key) == held_.end()) {
    // Another user's standing claim keeps these pictures: joined.
    for (auto& [other, h] : held_) {
      if (h.content == content && h.claim->granted.load()) {
        h.sessions[session] = uid;
        return h.claim;
      }
    }
  }
  const uint64_t users = Users(uid);
  const uint64_t share = capacity_ / users;
  const uint64_t mine = UserBytes(uid, key) + bytes;
  if (mine > share) {
    *why = absl::StrCat(
        "its pictures need about ", MiB(bytes),
        (mine > bytes ? " (with this user's other sessions' " + MiB(mine) + ")" : std::string()),
        "; this user's share of the pixel cache is ", MiB(share), " (--pixel-cache-bytes ",
        MiB(capacity_), (users > 1 ? absl::StrCat(" over ", users, " users") : std::string()),
        ")");
    if (auto it = held_.find(key); it != held_.end()) Drop(it);
    return nullptr;
  }
  // Room within the cache: other users' claims over the new share give
  // way, newest first.
  uint64_t total = bytes;
  for (const auto& [other, h] : held_) total += other != key ? h.bytes : 0;
  while (total > capacity_) {
    std::map<int64_t, uint64_t> per_user;
    for (const auto& [other, h] : held_) {
      if (other != key) per_user[h.uid] += h.bytes;
    }
    auto newest = held_.end();
    for (auto o = held_.begin(); o != held_.end(); ++o) {
      if (o->first == key || o->second.uid == uid || per_user[o->second.uid] <= share) continue;
      if (newest == held_.end() || o->second.order > newest->second.order) newest = o;
    }
    if (newest == held_.end()) break;  // Everyone else is within share.
    total -= newest->second.bytes;
    Drop(newest);
    revoked_.fetch_add(1);
  }
  if (total > capacity_) {
    *why = absl::StrCat("the pixel cache (--pixel-cache-bytes ", MiB(capacity_),
                        ") is taken by other users' pictures within their shares");
    if (auto it = held_.find(key); it != held_.end()) Drop(it);
    return nullptr;
  }
  auto [it, added] = held_.try_emplace(key);
  Held& h = it->second;
  if (added) {
    h.uid = uid;
    h.content = content;
    h.order = next_order_++;
    h.claim = std::make_shared<Claim>();
  }
  h.bytes = bytes;
  h.sessions[session] = uid;
  h.claim->granted.store(true);
  return h.claim;
}

void PixelShares::Release(uint64_t session) {
  absl::MutexLock lock(&mu_);
  for (auto it = held_.begin(); it != held_.end();) {
    auto next = std::next(it);
    Held& h = it->second;
    if (h.sessions.erase(session) > 0) {
      if (h.sessions.empty()) {
        Drop(it);
        released_.fetch_add(1, std::memory_order_relaxed);
      } else if (std::none_of(h.sessions.begin(), h.sessions.end(),
                              [&](const auto& s) { return s.second == h.uid; })) {
        h.uid = h.sessions.begin()->second;  // Its user left: charged to who holds it.
      }
    }
    it = next;
  }
}

uint64_t PixelShares::claimed() const {
  absl::MutexLock lock(&mu_);
  uint64_t n = 0;
  for (const auto& [key, h] : held_) n += h.bytes;
  return n;
}

uint64_t PixelShares::share() const {
  absl::MutexLock lock(&mu_);
  return capacity_ / std::max<uint64_t>(1, held_.empty() ? 1 : Users(held_.begin()->second.uid));
}

}  // namespace stoker
