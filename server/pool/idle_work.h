// Work nobody waits for (filling the rest of a partly decoded volume), done
// by session producers whose trainers are behind: a producer with no free
// slot, whose trainer has released none for a whole wait (50 ms), runs
// tasks here one at a time until a slot frees (ServingSession::Produce
// through RingProducer::Claim's idle hook). So it runs only while some
// session is well ahead of its trainer (a step on the GPU), on that
// session's producer thread, never while a trainer waits for batches or
// merely between them, and a batch whose slot frees meanwhile waits for
// at most the one task under way. Tasks should be short (one chunk).
//
// Thread-safe: any thread posts; any number of producers run tasks at once.
// Stop() drops what is queued and refuses more.
#ifndef STOKER_SERVER_POOL_IDLE_WORK_H_
#define STOKER_SERVER_POOL_IDLE_WORK_H_

#include <deque>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace stoker {

class IdleWork {
 public:
  // Queues `task` (FIFO); dropped after Stop().
  void Post(std::function<void()> task);
  // Runs the oldest task on the caller; false when there was none.
  bool RunOne();
  void Stop();

  size_t queued() const;

 private:
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace stoker

#endif  // STOKER_SERVER_POOL_IDLE_WORK_H_
