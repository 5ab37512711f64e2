// Work that outlives the call that began it (a streamed opening's indexing,
// which goes on after its session was answered), each on a thread of its
// own. Stop() waits for all of it, so what the work uses (the daemon's
// clients, budgets and caches) may go once it returns; the work itself
// must end soon once asked (the daemon's shutdown flag). Threads that
// ended are joined as new work starts, so a long-lived daemon keeps none.
//
// Thread-safe. The destructor stops.
#ifndef STOKER_SERVER_POOL_BACKGROUND_WORK_H_
#define STOKER_SERVER_POOL_BACKGROUND_WORK_H_

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace stoker {

class BackgroundWork {
 public:
  BackgroundWork() = default;
  ~BackgroundWork() { Stop(); }
  BackgroundWork(const BackgroundWork&) = delete;
  BackgroundWork& operator=(const BackgroundWork&) = delete;

  // Runs `work` on a thread of its own (an exception it throws is logged);
  // false, without running it, after Stop() or when no thread could be
  // made (logged). Not from the work itself.
  bool Start(std::function<void()> work);
  // Waits for every work begun (a concurrent Stop waits too); later Starts
  // are refused. Not from the work itself.
  void Stop();
  // Work begun and not ended.
  size_t running() const;

 private:
  struct Job {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  absl::Mutex stop_mu_;  // Held by Stop while it joins.
  mutable absl::Mutex mu_;
  std::vector<Job> jobs_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace stoker

#endif  // STOKER_SERVER_POOL_BACKGROUND_WORK_H_
