// The daemon's control of its pools: each tick reports the sessions' and
// pools' counters to the LoadMonitor (windows, diagnoses), shares every
// node's decode threads fairly among users and their sessions, and
// carries out autotune's resizes; an admin's ResizePool goes through it
// too. Stats read its view of each session and pool.
//
// Not thread-safe: the daemon calls it under the lock of its session
// table.
#ifndef STOKER_SERVER_DAEMON_CONTROLLER_H_
#define STOKER_SERVER_DAEMON_CONTROLLER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/stoker.pb.h"
#include "server/daemon/options.h"
#include "server/pool/load_monitor.h"
#include "server/pool/node_pools.h"
#include "server/pool/thread_pool.h"
#include "server/serve/session.h"

namespace stoker {

class Controller {
 public:
  // One open session, as the controller sees it.
  struct Member {
    uint64_t id = 0;
    int node = 0;
    int64_t owner_uid = -1;
    ServingSession* session = nullptr;
  };

  // `options` must outlive the controller.
  explicit Controller(const DaemonOptions& options);

  // One tick at `now_ns` over the open sessions: reports, fair shares of
  // decode threads, and (with autotune) at most one resize.
  void Tick(uint64_t now_ns, const std::vector<Member>& sessions, NodePools& decode,
            ThreadPool& reader);
  // An admin's resize: INVALID_ARGUMENT for an unknown pool or node, or a
  // thread count out of 1..1024 (or under one per node).
  absl::StatusOr<v1::ResizePoolResponse> Resize(const v1::ResizePoolRequest& request,
                                                NodePools& decode, ThreadPool& reader);

  // The monitor's view of a session (diagnosis, rates) into `s`.
  void AddSessionView(v1::SessionStats* s) const;
  // The pools, with their measured busy fractions, into `s`.
  void AddPoolStats(v1::DaemonStats* s, const NodePools* decode,
                    const ThreadPool* reader) const;
  uint64_t autotune_changes() const { return autotune_changes_; }

 private:
  const DaemonOptions& options_;
  LoadMonitor monitor_;
  uint64_t autotune_changes_ = 0;
};

}  // namespace stoker

#endif  // STOKER_SERVER_DAEMON_CONTROLLER_H_
