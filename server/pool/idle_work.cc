#include "server/pool/idle_work.h"

#include <utility>

#include "util/log.h"

namespace stoker {

void IdleWork::Post(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  tasks_.push_back(std::move(task));
}

bool IdleWork::RunOne() {
  std::function<void()> task;
  {
    absl::MutexLock lock(&mu_);
    if (tasks_.empty()) return false;
    task = std::move(tasks_.front());
    tasks_.pop_front();
  }
  RunLoggingExceptions("idle work", task);
  return true;
}

void IdleWork::Stop() {
  std::deque<std::function<void()>> dropped;
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  dropped.swap(tasks_);
}

size_t IdleWork::queued() const {
  absl::MutexLock lock(&mu_);
  return tasks_.size();
}

}  // namespace stoker
