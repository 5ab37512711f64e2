// A fixed-size pool of worker threads running closures in FIFO order.
//
// Thread-safe: Schedule() may be called from any thread. The destructor
// runs every task already scheduled, then joins the workers; a task must
// not destroy its own pool. Tasks must not throw.
#ifndef STOKER_SERVER_THREAD_POOL_H_
#define STOKER_SERVER_THREAD_POOL_H_

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace stoker {

class ThreadPool {
 public:
  ThreadPool(std::string name, int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Schedule(std::function<void()> task);
  int size() const { return static_cast<int>(workers_.size()); }
  size_t queued() const;

 private:
  void WorkerLoop();

  // Constant after construction.
  const std::string name_;
  std::vector<std::thread> workers_;

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace stoker

#endif  // STOKER_SERVER_THREAD_POOL_H_
