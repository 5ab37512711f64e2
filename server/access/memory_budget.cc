#include "server/access/memory_budget.h"

#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace stoker {

struct MemoryBudget::State {
  const uint64_t total, per_user;
  absl::Mutex mu;
  uint64_t used ABSL_GUARDED_BY(mu) = 0;
  int waiting ABSL_GUARDED_BY(mu) = 0;
  absl::flat_hash_map<int64_t, uint64_t> by_uid ABSL_GUARDED_BY(mu);

  // Waits in progress, by ticket (their order of arrival): whom for, how
  // much.
  uint64_t next_ticket ABSL_GUARDED_BY(mu) = 0;
  std::map<uint64_t, std::pair<int64_t, uint64_t>> queue ABSL_GUARDED_BY(mu);

  // used <= total always holds, and a uid's <= per_user unless it was let
  // past alone (`alone`): no subtraction wraps.
  bool Room(int64_t uid, uint64_t bytes, bool alone) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return bytes <= total - used && UserRoom(uid, bytes, alone);
  }
  bool UserRoom(int64_t uid, uint64_t bytes, bool alone) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = by_uid.find(uid);
    const uint64_t mine = it == by_uid.end() ? 0 : it->second;
    if (uid < 0 || per_user == 0) return true;
    return mine == 0 ? (alone || bytes <= per_user) : mine <= per_user && bytes <= per_user - mine;
  }
  // Whether the wait of `ticket` may take its bytes: room, and no earlier
  // wait that its own user's share lets through, nor any earlier wait of
  // the same user, is still waiting. Waits take the total in turn, so a
  // large read is never passed forever by smaller ones; one held back by
  // its own user's share holds back that user's later waits (so a request
  // larger than the share runs as soon as its user's bytes drain) and no
  // one else's.
  bool Turn(uint64_t ticket, int64_t uid, uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!Room(uid, bytes, true)) return false;
    for (const auto& [t, w] : queue) {
      if (t >= ticket) break;
      if (w.first == uid || UserRoom(w.first, w.second, true)) return false;
    }
    return true;
  }
  // Takes `bytes` for `uid` (Room said yes); the token gives them back.
  static std::shared_ptr<void> Take(const std::shared_ptr<State>& s, int64_t uid, uint64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
    s->by_uid[uid] += bytes;
    s->used += bytes;
    // The token's deleter gives the bytes back; it owns nothing else.
    return std::shared_ptr<void>(new char, [s, uid, bytes](char* p) {
      delete p;
      absl::MutexLock lock(&s->mu);
      s->used -= bytes;
      auto it = s->by_uid.find(uid);
      if (it != s->by_uid.end() && (it->second -= bytes) == 0) s->by_uid.erase(it);
    });
  }
};

MemoryBudget::MemoryBudget(uint64_t total, uint64_t per_user)
    : state_(std::shared_ptr<State>(new State{total, per_user})) {}

std::shared_ptr<void> MemoryBudget::Charge(int64_t uid, uint64_t bytes) {
  std::shared_ptr<State> s = state_;
  absl::MutexLock lock(&s->mu);
  return s->Room(uid, bytes, /*alone=*/false) ? State::Take(s, uid, bytes) : nullptr;
}

std::shared_ptr<void> MemoryBudget::Wait(int64_t uid, uint64_t bytes, absl::Duration timeout,
                                         const Cancellation* cancel) {
  std::shared_ptr<State> s = state_;
  if (bytes > s->total) return nullptr;
  // A raised cancellation wakes the wait: taking and releasing mu makes
  // the waiter look at its condition again. Subscribed before mu is held
  // (its callback takes mu), and forgotten after it is released.
  const Cancellation::Id woken =
      cancel != nullptr ? cancel->Subscribe([s] { absl::MutexLock touch(&s->mu); }) : 0;
  std::shared_ptr<void> token;
  {
    absl::MutexLock lock(&s->mu);
    const uint64_t ticket = s->next_ticket++;
    s->queue.emplace(ticket, std::make_pair(uid, bytes));
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
      return (cancel != nullptr && cancel->cancelled()) || s->Turn(ticket, uid, bytes);
    };
    ++s->waiting;
    const bool woke = s->mu.AwaitWithTimeout(absl::Condition(&ready), timeout);
    --s->waiting;
    s->queue.erase(ticket);
    if (woke && !(cancel != nullptr && cancel->cancelled())) token = State::Take(s, uid, bytes);
  }
  if (cancel != nullptr) cancel->Unsubscribe(woken);
  return token;
}

absl::StatusOr<std::shared_ptr<void>> MemoryBudget::WaitNamed(
    int64_t uid, uint64_t bytes, absl::Duration timeout, const Cancellation* cancel,
    absl::string_view what, absl::string_view flag) {
  std::shared_ptr<void> room = Wait(uid, bytes, timeout, cancel);
  if (room != nullptr) return room;
  if (cancel != nullptr && cancel->cancelled())
    return absl::CancelledError(absl::StrCat(what, ": its session closed"));
  return absl::ResourceExhaustedError(absl::StrCat(
      what, " (", bytes, " bytes) found no room among the bytes in flight (", flag,
      "; more than it is never taken)"));
}

uint64_t MemoryBudget::total() const { return state_->total; }

uint64_t MemoryBudget::used() const {
  absl::MutexLock lock(&state_->mu);
  return state_->used;
}

int MemoryBudget::waiting() const {
  absl::MutexLock lock(&state_->mu);
  return state_->waiting;
}

uint64_t MemoryBudget::used_by(int64_t uid) const {
  absl::MutexLock lock(&state_->mu);
  auto it = state_->by_uid.find(uid);
  return it == state_->by_uid.end() ? 0 : it->second;
}

}  // namespace stoker
