#include "server/memory_budget.h"

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace stoker {

struct MemoryBudget::State {
  const uint64_t total, per_user;
  absl::Mutex mu;
  uint64_t used ABSL_GUARDED_BY(mu) = 0;
  absl::flat_hash_map<int64_t, uint64_t> by_uid ABSL_GUARDED_BY(mu);
};

MemoryBudget::MemoryBudget(uint64_t total, uint64_t per_user)
    : state_(std::shared_ptr<State>(new State{total, per_user})) {}

std::shared_ptr<void> MemoryBudget::Charge(int64_t uid, uint64_t bytes) {
  std::shared_ptr<State> s = state_;
  {
    absl::MutexLock lock(&s->mu);
    uint64_t& mine = s->by_uid[uid];
    // used <= total and mine <= per_user always hold: no subtraction wraps.
    const bool total_room = bytes <= s->total - s->used;
    const bool user_room = uid < 0 || s->per_user == 0 || bytes <= s->per_user - mine;
    if (!total_room || !user_room) {
      if (mine == 0) s->by_uid.erase(uid);
      return nullptr;
    }
    mine += bytes;
    s->used += bytes;
  }
  // The token's deleter gives the bytes back; it owns nothing else.
  return std::shared_ptr<void>(new char, [s, uid, bytes](char* p) {
    delete p;
    absl::MutexLock lock(&s->mu);
    s->used -= bytes;
    auto it = s->by_uid.find(uid);
    if (it != s->by_uid.end() && (it->second -= bytes) == 0) s->by_uid.erase(it);
  });
}

uint64_t MemoryBudget::used() const {
  absl::MutexLock lock(&state_->mu);
  return state_->used;
}

uint64_t MemoryBudget::used_by(int64_t uid) const {
  absl::MutexLock lock(&state_->mu);
  auto it = state_->by_uid.find(uid);
  return it == state_->by_uid.end() ? 0 : it->second;
}

}  // namespace stoker
