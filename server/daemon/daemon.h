// The daemon's core service, free of gRPC (grpc_service.h adapts it): the
// session table (open, hand over, attach, close), who may do what to which
// session, and the reaper that reclaims the rings of clients that
// vanished. What sessions share is the Engine's (engine.h: pools, caches,
// budgets); ring quotas are a RingQuota's; pool control is the
// Controller's (controller.h).
//
// Lifecycle: construct, Start(), serve calls from any thread, Stop() (which
// refuses new sessions, closes every session with kClosedByShutdown, each
// on a thread of its own, and joins the reaper). Every public method is
// thread-safe. Sessions are closed outside mu_ because
// ServingSession::Stop waits for its tasks in flight;
// each session closes on a thread of its own (CloseSession waits for it
// at most DaemonOptions::close_wait), so one whose reads hang delays no
// other's close, and holds no gRPC thread long.
#ifndef STOKER_SERVER_DAEMON_DAEMON_H_
#define STOKER_SERVER_DAEMON_DAEMON_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "proto/stoker.pb.h"
#include "server/access/authorizer.h"
#include "server/access/ring_quota.h"
#include "server/cache/l2_cache.h"
#include "server/daemon/controller.h"
#include "server/daemon/engine.h"
#include "server/daemon/openings.h"
#include "server/daemon/options.h"
#include "server/dataset/dataset.h"
#include "server/pool/background_work.h"
#include "server/pool/node_pools.h"
#include "server/serve/session.h"

namespace stoker {

class Daemon {
 public:
  explicit Daemon(DaemonOptions options);
  ~Daemon();  // Stop().

  // Removes rings orphaned by a previous daemon, starts the decode pools
  // (per NUMA node) and the reaper. FAILED_PRECONDITION if called twice;
  // INVALID_ARGUMENT for a bad numa_topology.
  absl::Status Start();
  void Stop();

  // Every call below takes its caller; the session belongs to the caller's
  // uid. With a handoff socket configured, callers must be authenticated
  // (authorizer().Authenticate) by the adapter; without one (in-process use) everyone
  // is the default admin caller.
  absl::StatusOr<v1::OpenSessionResponse> OpenSession(
      const v1::OpenSessionRequest& request, const Caller& caller = Caller());

  // Registers the control stream of a session. `on_close` runs once, on an
  // arbitrary thread, when the daemon closes the session (CloseSession,
  // shutdown, reaper). NOT_FOUND for an unknown session,
  // FAILED_PRECONDITION when another stream is attached, PERMISSION_DENIED
  // for another user's session.
  absl::Status Attach(uint64_t session_id, std::function<void()> on_close,
                      const Caller& caller = Caller());
  // The attached stream is finished: forget its callback. If the client side
  // ended it (`client_gone`), the session is closed and its ring reclaimed.
  void Detach(uint64_t session_id, bool client_gone);

  // The ring of `session_id` as a new descriptor for a client presenting
  // the session's handoff token (the caller sends it and closes it). The
  // first peer's uid becomes the session's owner; later requests must come
  // from the same uid. The peer's pid (SO_PEERCRED, as this daemon sees it)
  // becomes the pid watched for the client's death. PERMISSION_DENIED for a
  // wrong token or uid, NOT_FOUND for an unknown session.
  absl::StatusOr<int> HandOffRing(uint64_t session_id, const std::string& token,
                                  uid_t peer_uid, pid_t peer_pid);
  // Descriptors of the session's slabs (shm/slab_ring.h's order; none
  // without SessionSpec.slabs), for the peer HandOffRing just answered (the
  // caller closes them): once per session, so that no peer collects copies.
  // NOT_FOUND for an unknown session, FAILED_PRECONDITION the second time.
  absl::StatusOr<std::vector<int>> SlabDescriptors(uint64_t session_id);

  // PERMISSION_DENIED unless the caller owns the session or is an admin.
  absl::Status CloseSession(uint64_t session_id, const Caller& caller = Caller());
  // Other users' sessions are listed without their dataset and pid unless
  // the caller is an admin.
  v1::DaemonStats GetStats(const Caller& caller = Caller()) const;
  std::vector<v1::SessionStats> ListSessions(const Caller& caller = Caller()) const;
  // The files behind dataset indices of a session: its owner or an admin.
  absl::StatusOr<v1::DescribeSamplesResponse> DescribeSamples(
      const v1::DescribeSamplesRequest& request, const Caller& caller = Caller());
  // Admins only (PERMISSION_DENIED otherwise), like WarmCache.
  absl::StatusOr<v1::ResizePoolResponse> ResizePool(
      const v1::ResizePoolRequest& request, const Caller& caller = Caller());

  // Tokens, admins and the roots confined callers prove (the ring
  // handoff adapter issues and registers them; the gRPC adapter
  // authenticates with them).
  Authorizer& authorizer() { return auth_; }
  // Recorded for stats only (the /metrics exporter lives outside the core).
  void SetMetricsPort(int port) { metrics_port_.store(port); }

  // Starts warming a dataset's encoded samples into L1/L2 in the
  // background with at most `concurrency` reads at once.
  absl::StatusOr<v1::WarmCacheResponse> WarmCache(
      const v1::WarmCacheRequest& request, const Caller& caller = Caller());
  // Waits for every warm job to finish (tests, benchmarks).
  void WaitForWarmJobs();
  L2Cache* l2() { return engine_.l2(); }
  int decode_threads() const { return engine_.pools_or_null()->threads(); }  // All nodes'.
  // The decode pools, after Start().
  const NodePools& decode_pools() const { return *engine_.pools_or_null(); }

 private:
  struct Entry {
    std::unique_ptr<ServingSession> session;
    std::function<void()> on_close;
    bool attached = false;
    bool pid_visible = false;  // The client pid could be checked at open.
    std::string handoff_token;  // Secret shown only to the opener.
    int64_t owner_uid = -1;     // Set when the ring is handed over.
    uint32_t peer_pid = 0;      // Likewise; 0: use the reported pid.
    int node = 0;               // Its decode pool's NUMA node,
    std::string placement;      // and why.
    absl::Time opened = absl::Now();
  };
  // `access`: the caller's object store endpoint and credentials (empty:
  // none), for this open only.
  // `pid`: the caller's process, shown with the opening (0: none).
  // `streamed`: the opening may go on after it returns (Dataset::growth),
  // shown as long as it does (it holds its progress).
  absl::StatusOr<std::shared_ptr<const Dataset>> LoadDataset(
      const v1::DatasetSpec& spec, const Caller& caller, const v1::ObjectStoreAccess& access,
      uint32_t pid = 0, bool streamed = false);
  // Removes the entry and counts it closed; none if absent. Its ring quota
  // stays reserved until Finish.
  std::optional<Entry> Take(uint64_t session_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the session of a client that is gone (`why`) and closes it apart.
  void Reclaim(uint64_t session_id, const std::string& why);
  // Takes the session and closes it (kClosedBySession; `discard`: its
  // ring's pages too) on a thread of its own, then runs `then` there: a
  // close waits for the session's reads in flight (a hung NFS read), and
  // nothing else need wait for it. Notified once closed; null if absent.
  std::shared_ptr<absl::Notification> CloseApart(uint64_t session_id, bool discard,
                                                 std::function<void()> then);
  // `discard`: the client is gone; the ring's pages go back at once.
  void Finish(Entry entry, shm::CloseReason reason, bool discard = false);
  void ReapLoop();
  // One reaper tick of the controller over the open sessions.
  void ControlTick(uint64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A session's stats, without what `caller` may not see of another's.
  v1::SessionStats VisibleStats(const Entry& e, const Caller& caller) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const DaemonOptions options_;
  const uint64_t generation_;
  const absl::Time started_;
  Authorizer auth_;

  Engine engine_;
  Openings openings_;  // Datasets being opened, for GetStats.
  RingQuota quota_;
  std::thread reaper_;
  absl::Notification stop_reaper_;
  BackgroundWork closing_;  // Reclaims, each on a thread of its own.

  mutable absl::Mutex mu_;
  bool started_flag_ ABSL_GUARDED_BY(mu_) = false;  // Start() was called.
  bool serving_ ABSL_GUARDED_BY(mu_) = false;       // Start() completed.
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;  // From FirstSessionId.
  absl::flat_hash_map<uint64_t, Entry> sessions_ ABSL_GUARDED_BY(mu_);
  uint64_t opened_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t closed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t reclaimed_ ABSL_GUARDED_BY(mu_) = 0;  // Closed, ring and quota back.
  Controller controller_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> metrics_port_{0};
};

}  // namespace stoker

#endif  // STOKER_SERVER_DAEMON_DAEMON_H_
