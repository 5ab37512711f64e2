#include "server/pool/background_work.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "util/log.h"

namespace stoker {

bool BackgroundWork::Start(std::function<void()> work) {
  std::vector<Job> ended;
  bool started = false;
  {
    absl::MutexLock lock(&mu_);
    if (!stopped_) {
      for (auto it = jobs_.begin(); it != jobs_.end();) {
        if (it->done->load()) {
          ended.push_back(std::move(*it));
          it = jobs_.erase(it);
        } else {
          ++it;
        }
      }
      try {
        jobs_.reserve(jobs_.size() + 1);  // The push below cannot throw then.
        auto done = std::make_shared<std::atomic<bool>>(false);
        std::thread t([work = std::move(work), done] {
          RunLoggingExceptions("background work", work);
          done->store(true);
        });
        jobs_.push_back(Job{std::move(t), std::move(done)});
        started = true;
      } catch (const std::exception& e) {  // No thread or no memory: not run.
        LogError(absl::StrCat("background work not started: ", e.what()));
      }
    }
  }
  for (Job& j : ended) j.thread.join();  // Ended already: at once.
  return started;
}

void BackgroundWork::Stop() {
  absl::MutexLock stopping(&stop_mu_);  // A second Stop waits for the first.
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
