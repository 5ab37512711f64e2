// A pool of worker threads running closures, resizable while it runs, that
// accounts the time its workers spend in tasks. Tasks belong to groups (a
// session each) and groups to users: FIFO within a group; the users with
// work take turns, one task each, and within a user its groups with work
// take turns (a group of weight w runs up to w of its user's tasks per
// turn). So N busy users each get about 1/N of a saturated pool however
// many sessions and priorities each has, a user's sessions share its part
// by weight, a session that queues more work (bigger batches, more ring
// slots) crowds out nobody, and an idle one's turns go to the rest.
//
// Turns share the threads that come free; they cannot take back threads a
// user's tasks hold (a read blocked on a slow store holds its thread). So a
// pool may also cap the workers one user's tasks hold at once
// (SetUserCap): a user at its cap keeps its turn, and its further tasks
// wait queued, while other users' tasks run on the threads it cannot
// take. Tasks of no user (-1: the daemon's own) are never capped.
//
// Thread-safe: Schedule() and Resize() may be called from any thread.
// Shrinking retires workers as they finish their current task, so no task
// is dropped or run twice and each group's order is kept. The destructor runs every
// task already scheduled, then joins the workers; a task must not destroy
// its own pool. Tasks must not throw.
#ifndef STOKER_SERVER_POOL_THREAD_POOL_H_
#define STOKER_SERVER_POOL_THREAD_POOL_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace stoker {

class ThreadPool {
 public:
  // `worker_init`, if set, runs first on every worker thread (pinning).
  // `worker_idle`, if set, runs on a worker each time it finds no task it
  // may run, before it waits (a thread gives back what it kept for its
  // tasks).
  ThreadPool(std::string name, int threads,
             std::function<void()> worker_init = nullptr,
             std::function<void()> worker_idle = nullptr);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // `weight` (>= 1) and `user` are the group's, as of its latest task;
  // groups with no user (-1) share one.
  void Schedule(std::function<void()> task, uint64_t group = 0, int weight = 1,
                int64_t user = -1);
  // Grows or shrinks to `threads` (at least 1) workers.
  void Resize(int threads);
  // At most `threads` workers run one user's tasks at once; 0: no cap.
  void SetUserCap(int threads);
  // Takes `group`'s queued tasks out of the pool, in their order, for the
  // caller to run or drop: a closing session's tasks, which would
  // otherwise wait for turns (and its user's cap) only to do nothing.
  // Tasks already running are not among them.
  std::deque<std::function<void()>> TakeQueued(uint64_t group);

  const std::string& name() const { return name_; }
  int size() const;  // Target number of workers.
  size_t queued() const;
  // Workers running a task now.
  int active() const;
  // Nanoseconds all workers have spent running tasks, including the time so
  // far of tasks still running (a pool busy with long tasks reads busy now,
  // not when they end).
  uint64_t busy_ns() const;

 private:
  void WorkerLoop();
  // Whether `user` (a key of users_) may start another task now.
  bool UnderCap(uint64_t user) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The first user in turn order under its cap; turns_.end() if none.
  std::deque<uint64_t>::iterator NextTurn() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartWorker() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void Account(int delta);  // A task starts (+1) or ends (-1).

  const std::string name_;
  const std::function<void()> worker_init_;
  const std::function<void()> worker_idle_;
  mutable absl::Mutex busy_mu_;  // Taken twice per task, briefly.
  uint64_t busy_settled_ns_ ABSL_GUARDED_BY(busy_mu_) = 0;
  uint64_t busy_since_ns_ ABSL_GUARDED_BY(busy_mu_) = 0;
  int active_ ABSL_GUARDED_BY(busy_mu_) = 0;

  mutable absl::Mutex mu_;
  // Queued tasks by group; the users with tasks in turn order, and each
  // user's groups with tasks in turn order.
  struct Queue {
    std::deque<std::function<void()>> tasks;
    int weight = 1;
    int used = 0;  // Tasks run in its current turn.
    uint64_t user = 0;  // Key into users_.
  };
  absl::flat_hash_map<uint64_t, Queue> queues_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, std::deque<uint64_t>> users_ ABSL_GUARDED_BY(mu_);
  std::deque<uint64_t> turns_ ABSL_GUARDED_BY(mu_);  // Users.
  size_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  // Workers each user's tasks hold now (users with none are absent), and
  // the most they may hold (0: any number).
  absl::flat_hash_map<uint64_t, int> held_ ABSL_GUARDED_BY(mu_);
  int user_cap_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(mu_);  // Incl. retired.
  int target_ ABSL_GUARDED_BY(mu_) = 0;
  int running_ ABSL_GUARDED_BY(mu_) = 0;  // Workers not yet retired.
  std::vector<std::thread::id> retired_ ABSL_GUARDED_BY(mu_);  // To join.
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

// Runs fn(0) .. fn(n - 1), each once, on the calling thread and on up to
// `helpers` tasks of `pool` (group `group`), and returns when all have run.
// The caller takes items too and never waits for a helper that has not
// started, so it may itself be one of `pool`'s tasks (a busy or one-worker
// pool cannot deadlock it). A null pool or no helpers: all on the caller.
void ParallelFor(ThreadPool* pool, int helpers, size_t n,
                 const std::function<void(size_t)>& fn, uint64_t group = 0);

}  // namespace stoker

#endif  // STOKER_SERVER_POOL_THREAD_POOL_H_
