// The gRPC adapter over Daemon: converts messages and absl::Status to
// grpc::Status and nothing else (no logic lives here). Uses gRPC's callback
// API so the long-lived Attach streams hold no threads; calls that scan a
// dataset (OpenSession, WarmCache) run on a thread of their own, so a slow
// or huge folder never holds one of gRPC's.
//
// GrpcServer owns a grpc::Server listening on a Unix socket, with gRPC's
// built-in grpc.health.v1 service. Thread-safe; Shutdown() is idempotent
// and must run before the Daemon it serves is destroyed.
#ifndef STOKER_SERVER_DAEMON_GRPC_SERVICE_H_
#define STOKER_SERVER_DAEMON_GRPC_SERVICE_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "proto/stoker.grpc.pb.h"
#include "server/access/call_budget.h"
#include "server/daemon/daemon.h"
#include "server/pool/thread_pool.h"

namespace stoker {

grpc::Status ToGrpcStatus(const absl::Status& s);


class GrpcService final : public v1::Stoker::CallbackService {
 public:
  // Slow calls (OpenSession, WarmCache) run on a pool of kSlowCallThreads,
  // users taking turns, at most kSlowCallsPerUser in flight per user and
  // kSlowCallsInFlight in all (CallBudget); the rest on gRPC's threads.
  static constexpr int kSlowCallThreads = 8;
  static constexpr int kSlowCallsPerUser = 4;
  static constexpr int kSlowCallsInFlight = 64;

  explicit GrpcService(Daemon* daemon)
      : daemon_(daemon),
        slow_pool_("stoker-open", kSlowCallThreads),
        slow_budget_(kSlowCallsInFlight, kSlowCallsPerUser) {}

  // Waits until every offloaded call has finished (at shutdown).
  void WaitForOffloaded();

  grpc::ServerUnaryReactor* OpenSession(
      grpc::CallbackServerContext* ctx, const v1::OpenSessionRequest* req,
      v1::OpenSessionResponse* resp) override;
  grpc::ServerWriteReactor<v1::AttachEvent>* Attach(
      grpc::CallbackServerContext* ctx, const v1::AttachRequest* req) override;
  grpc::ServerUnaryReactor* CloseSession(
      grpc::CallbackServerContext* ctx, const v1::CloseSessionRequest* req,
      v1::CloseSessionResponse* resp) override;
  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* ctx,
                                     const v1::GetStatsRequest* req,
                                     v1::GetStatsResponse* resp) override;
  grpc::ServerUnaryReactor* WarmCache(grpc::CallbackServerContext* ctx,
                                      const v1::WarmCacheRequest* req,
                                      v1::WarmCacheResponse* resp) override;
  grpc::ServerUnaryReactor* ResizePool(grpc::CallbackServerContext* ctx,
                                       const v1::ResizePoolRequest* req,
                                       v1::ResizePoolResponse* resp) override;
  grpc::ServerUnaryReactor* ListSessions(grpc::CallbackServerContext* ctx,
                                         const v1::ListSessionsRequest* req,
                                         v1::ListSessionsResponse* resp) override;
  grpc::ServerUnaryReactor* DescribeSamples(
      grpc::CallbackServerContext* ctx, const v1::DescribeSamplesRequest* req,
      v1::DescribeSamplesResponse* resp) override;

 private:
  // Runs fn() (returning absl::Status) on the slow-call pool for `caller`,
  // or refuses it at once past the budget.
  template <typename Fn>
  grpc::ServerUnaryReactor* Offload(grpc::CallbackServerContext* ctx,
                                    const absl::StatusOr<Caller>& caller, Fn fn);
  // The caller the call's token stands for (the default caller when the
  // daemon needs no authentication).
  absl::StatusOr<Caller> CallerOf(grpc::CallbackServerContext* ctx);

  Daemon* const daemon_;
  ThreadPool slow_pool_;
  CallBudget slow_budget_;
  absl::Mutex mu_;
  int offloaded_ ABSL_GUARDED_BY(mu_) = 0;
};

class GrpcServer {
 public:
  // Listens on unix:`socket_path` and sets the socket file's mode (who may
  // open sessions). A leftover socket file with no server behind it is
  // replaced; FAILED_PRECONDITION if a server answers there.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(
      Daemon* daemon, const std::string& socket_path, mode_t mode = 0660);
  ~GrpcServer();

  // Stops accepting calls, ends open streams, waits up to `grace`.
  void Shutdown(absl::Duration grace = absl::Seconds(2));
  const std::string& socket_path() const { return socket_path_; }

 private:
  GrpcServer(std::string socket_path, std::unique_ptr<GrpcService> service)
      : socket_path_(std::move(socket_path)), service_(std::move(service)) {}

  const std::string socket_path_;
  std::unique_ptr<GrpcService> service_;
  std::unique_ptr<grpc::Server> server_;
  bool shut_down_ = false;
};

}  // namespace stoker

#endif  // STOKER_SERVER_DAEMON_GRPC_SERVICE_H_
