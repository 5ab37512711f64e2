// Admission for calls that do slow work off gRPC's threads (OpenSession
// scans a dataset; WarmCache reads one): at most `per_user` such calls in
// flight for one uid and `total` in all. Past either, a call is refused at
// once with RESOURCE_EXHAUSTED instead of taking a thread or queueing
// without bound, so one user's flood of opens cannot hold the daemon's
// workers (the calls admitted run on a fixed pool, users taking turns).
//
// Thread-safe. Every successful Acquire(uid) is matched by one Release(uid).
#ifndef STOKER_SERVER_ACCESS_CALL_BUDGET_H_
#define STOKER_SERVER_ACCESS_CALL_BUDGET_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace stoker {

class CallBudget {
 public:
  CallBudget(int total, int per_user) : total_(total), per_user_(per_user) {}

  absl::Status Acquire(int64_t uid);
  void Release(int64_t uid);
  int in_flight() const;

 private:
  const int total_, per_user_;
  mutable absl::Mutex mu_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<int64_t, int> per_uid_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_SERVER_ACCESS_CALL_BUDGET_H_
