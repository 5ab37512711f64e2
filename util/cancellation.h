// A flag its owner raises once (a session, as it closes) for the work
// done on its behalf: work that runs reads cancelled(); work that waits
// elsewhere (a request queued in another thread's loop) subscribes a
// callback that wakes it when the flag is raised, so nothing polls.
//
// Thread-safe. A callback runs once: on the thread that raises the flag,
// or on the subscriber's own when the flag was raised before, always
// under the flag's lock, so it must be quick and must not call into the
// flag. Once Unsubscribe returns, its callback is not running and never
// will. Owned by shared_ptr where the work may outlive its owner.
#ifndef STOKER_UTIL_CANCELLATION_H_
#define STOKER_UTIL_CANCELLATION_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace stoker {

class Cancellation {
 public:
  using Id = uint64_t;  // 0: a subscription that needs no Unsubscribe.

  Cancellation() = default;
  Cancellation(const Cancellation&) = delete;
  Cancellation& operator=(const Cancellation&) = delete;

  // Raises the flag (again: nothing) and runs every callback subscribed.
  void Cancel() {
    absl::MutexLock lock(&mu_);
    if (cancelled_.exchange(true, std::memory_order_acq_rel)) return;
    for (auto& [id, fn] : subscribers_) fn();
    subscribers_.clear();
  }

  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

  // Runs `fn` when the flag is raised: now (returning 0) if it was.
  Id Subscribe(std::function<void()> fn) const {
    absl::MutexLock lock(&mu_);
    if (cancelled_.load(std::memory_order_acquire)) {
      fn();
      return 0;
    }
    const Id id = next_++;
    subscribers_.emplace(id, std::move(fn));
    return id;
  }

  void Unsubscribe(Id id) const {
    if (id == 0) return;
    absl::MutexLock lock(&mu_);
    subscribers_.erase(id);
  }

 private:
  // Written under mu_ (so a subscription sees it or is run by Cancel),
  // read anywhere: acquire/release, so what the owner did before raising
  // it is seen by work that reads it raised.
  std::atomic<bool> cancelled_{false};
  mutable absl::Mutex mu_;
  mutable Id next_ ABSL_GUARDED_BY(mu_) = 1;
  mutable std::map<Id, std::function<void()>> subscribers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_UTIL_CANCELLATION_H_
