#include "server/pool/background_work.h"

#include <utility>

#include "util/log.h"

namespace stoker {

bool BackgroundWork::Start(std::function<void()> work) {
  std::vector<Job> ended;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return false;
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      if (it->done->load()) {
        ended.push_back(std::move(*it));
        it = jobs_.erase(it);
      } else {
        ++it;
      }
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    jobs_.push_back(Job{std::thread([work = std::move(work), done] {
                          RunLoggingExceptions("background work", work);
                          done->store(true);
                        }),
                        done});
  }
  for (Job& j : ended) j.thread.join();  // Ended already: at once.
  return true;
}

void BackgroundWork::Stop() {
  std::vector<Job> jobs;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    jobs.swap(jobs_);
  }
  for (Job& j : jobs) j.thread.join();
}

size_t BackgroundWork::running() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const Job& j : jobs_) n += j.done->load() ? 0 : 1;
  return n;
}

}  // namespace stoker
