// Ring bytes and sessions per user and in all: the ledger a session's ring
// is counted in from before it is allocated (Reserve) until the session is
// closed (Release), so concurrent opens see each other and a user cannot
// take the node's shared memory by opening many sessions at once.
//
// Admins and in-process callers (uid < 0) are bound only by the node-wide
// byte limit. A refusal is RESOURCE_EXHAUSTED naming the daemon flag that
// set the limit. Thread-safe.
#ifndef STOKER_SERVER_ACCESS_RING_QUOTA_H_
#define STOKER_SERVER_ACCESS_RING_QUOTA_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/access/authorizer.h"

namespace stoker {

struct RingLimits {
  uint64_t bytes = 0;              // All rings together; 0: no limit.
  uint64_t bytes_per_user = 0;     // One non-admin user's rings; 0: none.
  uint32_t sessions_per_user = 0;  // One non-admin user's sessions; 0: none.
};

class RingQuota {
 public:
  explicit RingQuota(RingLimits limits) : limits_(limits) {}

  // Counts `bytes` for session `id` of `caller`, unless that would pass a
  // limit. A second Reserve of the same id replaces the first.
  absl::Status Reserve(const Caller& caller, uint64_t id, uint64_t bytes);
  // Session `id`'s ring now counts for `uid` (its ring was handed over).
  void SetOwner(uint64_t id, int64_t uid);
  // Session `id` is closed, or never opened: its bytes are free.
  void Release(uint64_t id);
  uint64_t bytes() const;           // All rings counted.
  uint64_t bytes_of(int64_t uid) const;

 private:
  struct Held {
    int64_t uid = -1;
    uint64_t bytes = 0;
  };
  const RingLimits limits_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Held> held_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_SERVER_ACCESS_RING_QUOTA_H_
