#include "server/pool/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <utility>

#include "shm/futex.h"
#include "util/log.h"

namespace stoker {
namespace {
// The key of tasks of no user (-1): no uid has it, and no cap binds it.
constexpr uint64_t kNoUser = uint64_t{1} << 63;
}  // namespace

ThreadPool::ThreadPool(std::string name, int threads,
                       std::function<void()> worker_init,
                       std::function<void()> worker_idle)
    : name_(std::move(name)),
      worker_init_(std::move(worker_init)),
      worker_idle_(std::move(worker_idle)) {
  Resize(threads);
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  // Workers drain the queue, then exit; Resize cannot run concurrently
  // with destruction, so the vector is stable now.
  for (auto& t : workers_) t.join();
}

void ThreadPool::StartWorker() {
  workers_.emplace_back([this] { WorkerLoop(); });
  static std::atomic<int> serial{0};
  std::string tname = (name_ + std::to_string(serial++)).substr(0, 15);
  pthread_setname_np(workers_.back().native_handle(), tname.c_str());
  ++running_;
}

void ThreadPool::Resize(int threads) {
  if (threads < 1) threads = 1;
  std::vector<std::thread> done;
  {
    absl::MutexLock lock(&mu_);
    // Reap workers retired by earlier shrinks (they have returned or are
    // returning), so repeated resizing holds no dead threads.
    for (auto it = workers_.begin(); it != workers_.end();) {
      bool retired = false;
      for (const auto& id : retired_) retired |= it->get_id() == id;
      if (retired) {
        done.push_back(std::move(*it));
        it = workers_.erase(it);
      } else {
        ++it;
      }
    }
    retired_.clear();
    target_ = threads;
    while (running_ < target_) StartWorker();
    // Surplus workers see running_ > target_ and retire after their task.
  }
  for (auto& t : done) t.join();
}

int ThreadPool::size() const {
  absl::MutexLock lock(&mu_);
  return target_;
}

void ThreadPool::Schedule(std::function<void()> task, uint64_t group, int weight,
                          int64_t user) {
  const uint64_t key = user >= 0 ? static_cast<uint64_t>(user) : kNoUser;
  absl::MutexLock lock(&mu_);
  Queue& q = queues_[group];
  if (q.tasks.empty()) {
    q.user = key;
    std::deque<uint64_t>& groups = users_[key];
    if (groups.empty()) turns_.push_back(key);
    groups.push_back(group);
  }
  q.tasks.push_back(std::move(task));
  q.weight = std::max(1, weight);
  ++queued_;
}

void ThreadPool::SetUserCap(int threads) {
  absl::MutexLock lock(&mu_);
  user_cap_ = std::max(0, threads);
}

std::deque<std::function<void()>> ThreadPool::TakeQueued(uint64_t group) {
  absl::MutexLock lock(&mu_);
  auto it = queues_.find(group);
  if (it == queues_.end()) return {};
  std::deque<std::function<void()>> tasks = std::move(it->second.tasks);
  const uint64_t user = it->second.user;
  queued_ -= tasks.size();
  queues_.erase(it);
  // A user is in turns_ exactly while it has groups with tasks.
  auto u = users_.find(user);
  std::deque<uint64_t>& groups = u->second;
  groups.erase(std::find(groups.begin(), groups.end(), group));
  if (groups.empty()) {
    users_.erase(u);
    turns_.erase(std::find(turns_.begin(), turns_.end(), user));
  }
  return tasks;
}

bool ThreadPool::UnderCap(uint64_t user) const {
  if (user_cap_ == 0 || user == kNoUser) return true;
  auto h = held_.find(user);
  return h == held_.end() || h->second < user_cap_;
}

std::deque<uint64_t>::iterator ThreadPool::NextTurn() {
  auto it = turns_.begin();
  while (it != turns_.end() && !UnderCap(*it)) ++it;
  return it;
}

size_t ThreadPool::queued() const {
  absl::MutexLock lock(&mu_);
  return queued_;
}

void ThreadPool::WorkerLoop() {
  if (worker_init_) worker_init_();
  bool holding = false;  // A task of `held` ran on this worker.
  uint64_t held = 0;
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      if (holding) {  // The task that ran no longer holds this worker.
        auto h = held_.find(held);
        if (--h->second == 0) held_.erase(h);
        holding = false;
      }
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return (running_ > target_ && !stopping_) || (stopping_ && queued_ == 0) ||
               (queued_ > 0 && NextTurn() != turns_.end());
      };
      if (worker_idle_ && !ready()) {  // Out of work: idle, then wait.
        mu_.Unlock();
        worker_idle_();
        mu_.Lock();
      }
      mu_.Await(absl::Condition(&ready));
      if (running_ > target_ && !stopping_) {
        --running_;  // Retire; joined by the next Resize or the destructor.
        retired_.push_back(std::this_thread::get_id());
        return;
      }
      if (queued_ == 0) return;  // Stopping and drained.
      // The first user in turn order under its cap runs a task of its
      // group whose turn it is; the user then waits for its next turn, and
      // the group after `weight` of its user's tasks. A user at its cap
      // keeps its place.
      const auto turn = NextTurn();
      if (turn == turns_.end()) continue;  // Not reached: `ready` saw one.
      const uint64_t user = *turn;
      turns_.erase(turn);
      ++held_[user];
      holding = true;
      held = user;
      auto u = users_.find(user);
      std::deque<uint64_t>& groups = u->second;
      const uint64_t group = groups.front();
      auto it = queues_.find(group);
      Queue& q = it->second;
      task = std::move(q.tasks.front());
      q.tasks.pop_front();
      --queued_;
      if (q.tasks.empty()) {
        groups.pop_front();
        queues_.erase(it);
      } else if (++q.used >= q.weight) {
        q.used = 0;
        groups.pop_front();
        groups.push_back(group);
      }
      if (groups.empty()) {
        users_.erase(u);
      } else {
        turns_.push_back(user);
      }
    }
    Account(+1);
    RunLoggingExceptions(name_, task);  // The last barrier: tasks guard their own.
    Account(-1);
  }
}

void ThreadPool::Account(int delta) {
  const uint64_t now = shm::MonotonicNanos();
  absl::MutexLock lock(&busy_mu_);
  busy_settled_ns_ += static_cast<uint64_t>(active_) * (now - busy_since_ns_);
  busy_since_ns_ = now;
  active_ += delta;
}

int ThreadPool::active() const {
  absl::MutexLock lock(&busy_mu_);
  return active_;
}


uint64_t ThreadPool::busy_ns() const {
  const uint64_t now = shm::MonotonicNanos();
  absl::MutexLock lock(&busy_mu_);
  return busy_settled_ns_ +
         static_cast<uint64_t>(active_) * (now - busy_since_ns_);
}

void ParallelFor(ThreadPool* pool, int helpers, size_t n,
                 const std::function<void(size_t)>& fn, uint64_t group) {
  struct State {
    std::atomic<size_t> next{0};
    absl::Mutex mu;
    int running ABSL_GUARDED_BY(mu) = 0;  // Helpers taking items now.
    bool closed ABSL_GUARDED_BY(mu) = false;  // The caller is done taking.
  };
  auto state = std::make_shared<State>();
  const std::function<void(size_t)>* work = &fn;
  auto take = [state, work, n] {
    for (size_t i; (i = state->next.fetch_add(1, std::memory_order_relaxed)) < n;) (*work)(i);
  };
  const int extra = pool == nullptr ? 0 : static_cast<int>(std::min<size_t>(
                                              std::max(helpers, 0), n > 0 ? n - 1 : 0));
  for (int h = 0; h < extra; ++h) {
    pool->Schedule(
        [state, take] {
          {
            absl::MutexLock lock(&state->mu);
            if (state->closed) return;  // Too late: `fn` may be gone.
            ++state->running;
          }
          take();
          absl::MutexLock lock(&state->mu);
          --state->running;
        },
        group);
  }
  take();
  absl::MutexLock lock(&state->mu);
  state->closed = true;
  auto idle = [&state]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state->mu) { return state->running == 0; };
  state->mu.Await(absl::Condition(&idle));
}

}  // namespace stoker
