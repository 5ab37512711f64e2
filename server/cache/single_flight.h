// Concurrent calls for one key run once: the first caller runs the work,
// callers that arrive while it runs wait for it and share its result
// (successes and errors alike). A call after it finished runs the work
// again, so a cache the work fills should be checked inside the work.
// Thread-safe.
#ifndef STOKER_SERVER_CACHE_SINGLE_FLIGHT_H_
#define STOKER_SERVER_CACHE_SINGLE_FLIGHT_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace stoker {

template <typename T>
class SingleFlight {
 public:
  T Do(const std::string& key, const std::function<T()>& work) {
    std::shared_ptr<Call> mine, theirs;
    {
      absl::MutexLock lock(&mu_);
      std::shared_ptr<Call>& slot = calls_[key];
      if (slot) {
        theirs = slot;
      } else {
        slot = mine = std::make_shared<Call>();
      }
    }
    if (theirs) {
      theirs->done.WaitForNotification();
      return *theirs->result;
    }
    mine->result.emplace(work());
    {
      absl::MutexLock lock(&mu_);
      calls_.erase(key);
    }
    mine->done.Notify();
    return *mine->result;
  }

 private:
  struct Call {
    absl::Notification done;
    std::optional<T> result;
  };
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Call>> calls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_SERVER_CACHE_SINGLE_FLIGHT_H_
