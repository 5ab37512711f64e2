#include "server/daemon/grpc_service.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/health_check_service_interface.h"
#include "shm/fd_passing.h"
#include "util/status_macros.h"

namespace stoker {

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

namespace {

template <typename Fn>
grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* ctx, Fn&& fn) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(Guarded("this call", fn)));
  return reactor;
}

// Holds an Attach stream open for a session's life. The daemon's close
// callback and gRPC's OnDone may race; `State` (shared with the callback)
// makes Finish happen at most once and never after the reactor is gone.
class AttachReactor : public grpc::ServerWriteReactor<v1::AttachEvent> {
 public:
  AttachReactor(Daemon* daemon, uint64_t session_id,
                const absl::StatusOr<Caller>& caller)
      : daemon_(daemon), id_(session_id), state_(std::make_shared<State>()) {
    state_->reactor = this;
    std::shared_ptr<State> state = state_;
    absl::Status st =
        caller.ok() ? daemon_->Attach(
                          id_, [state] { state->FinishOnce(grpc::Status::OK); },
                          *caller)
                    : caller.status();
    if (!st.ok()) {
      attached_ = false;
      state_->FinishOnce(ToGrpcStatus(st));
      return;
    }
    event_.set_kind(v1::AttachEvent::ATTACHED);
    event_.set_session_id(id_);
    StartWrite(&event_);
  }

  void OnWriteDone(bool /*ok*/) override {}

  // The client cancelled or its connection broke: it is gone.
  void OnCancel() override {
    if (attached_) daemon_->Detach(id_, /*client_gone=*/true);
    state_->FinishOnce(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    if (attached_) daemon_->Detach(id_, /*client_gone=*/false);
    {
      absl::MutexLock lock(&state_->mu);
      state_->reactor = nullptr;
    }
    delete this;
  }

 private:
  struct State {
    absl::Mutex mu;
    AttachReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;
    bool finished ABSL_GUARDED_BY(mu) = false;
    void FinishOnce(const grpc::Status& s) {
      absl::MutexLock lock(&mu);
      if (reactor == nullptr || finished) return;
      finished = true;
      reactor->Finish(s);
    }
  };

  Daemon* const daemon_;
  const uint64_t id_;
  std::shared_ptr<State> state_;
  bool attached_ = true;
  v1::AttachEvent event_;
};

}  // namespace

// Stores a StatusOr's value in the response, returning its status.
template <typename T>
absl::Status Into(absl::StatusOr<T> r, T* resp) {
  if (!r.ok()) return r.status();
  *resp = *std::move(r);
  return absl::OkStatus();
}

template <typename Fn>
grpc::ServerUnaryReactor* GrpcService::Offload(grpc::CallbackServerContext* ctx,
                                               const absl::StatusOr<Caller>& caller,
                                               Fn fn) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (!caller.ok()) {
    reactor->Finish(ToGrpcStatus(caller.status()));
    return reactor;
  }
  const int64_t uid = caller->uid;
  if (absl::Status admitted = slow_budget_.Acquire(uid); !admitted.ok()) {
    reactor->Finish(ToGrpcStatus(admitted));
    return reactor;
  }
  {
    absl::MutexLock lock(&mu_);
    ++offloaded_;
  }
  slow_pool_.Schedule(
      [this, reactor, uid, fn = std::move(fn)]() mutable {
        reactor->Finish(ToGrpcStatus(Guarded("this call", fn)));
        slow_budget_.Release(uid);
        absl::MutexLock lock(&mu_);
        --offloaded_;
      },
      static_cast<uint64_t>(uid));
  return reactor;
}

void GrpcService::WaitForOffloaded() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &offloaded_));
}

absl::StatusOr<Caller> GrpcService::CallerOf(grpc::CallbackServerContext* ctx) {
  if (!daemon_->authorizer().required()) return Caller();
  const auto& md = ctx->client_metadata();
  auto it = md.find(shm::kCallerTokenMetadata);
  if (it == md.end()) return daemon_->authorizer().Authenticate("");
  return daemon_->authorizer().Authenticate(std::string(it->second.data(), it->second.size()));
}

// Both scan a dataset, which may take long: never on gRPC's threads.
grpc::ServerUnaryReactor* GrpcService::OpenSession(
    grpc::CallbackServerContext* ctx, const v1::OpenSessionRequest* req,
    v1::OpenSessionResponse* resp) {
  absl::StatusOr<Caller> caller = CallerOf(ctx);
  return Offload(ctx, caller, [this, req, resp, caller] {
    return Into(daemon_->OpenSession(*req, *caller), resp);
  });
}

grpc::ServerUnaryReactor* GrpcService::WarmCache(
    grpc::CallbackServerContext* ctx, const v1::WarmCacheRequest* req,
    v1::WarmCacheResponse* resp) {
  absl::StatusOr<Caller> caller = CallerOf(ctx);
  return Offload(ctx, caller, [this, req, resp, caller] {
    return Into(daemon_->WarmCache(*req, *caller), resp);
  });
}

grpc::ServerUnaryReactor* GrpcService::ResizePool(
    grpc::CallbackServerContext* ctx, const v1::ResizePoolRequest* req,
    v1::ResizePoolResponse* resp) {
  return Unary(ctx, [&]() -> absl::Status {
    STOKER_ASSIGN_OR_RETURN(Caller caller, CallerOf(ctx));
    return Into(daemon_->ResizePool(*req, caller), resp);
  });
}

grpc::ServerUnaryReactor* GrpcService::ListSessions(
    grpc::CallbackServerContext* ctx, const v1::ListSessionsRequest* /*req*/,
    v1::ListSessionsResponse* resp) {
  return Unary(ctx, [&]() -> absl::Status {
    STOKER_ASSIGN_OR_RETURN(Caller caller, CallerOf(ctx));
    for (auto& s : daemon_->ListSessions(caller)) *resp->add_sessions() = std::move(s);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* GrpcService::DescribeSamples(
    grpc::CallbackServerContext* ctx, const v1::DescribeSamplesRequest* req,
    v1::DescribeSamplesResponse* resp) {
  return Unary(ctx, [&]() -> absl::Status {
    STOKER_ASSIGN_OR_RETURN(Caller caller, CallerOf(ctx));
    return Into(daemon_->DescribeSamples(*req, caller), resp);
  });
}

grpc::ServerWriteReactor<v1::AttachEvent>* GrpcService::Attach(
    grpc::CallbackServerContext* ctx, const v1::AttachRequest* req) {
  return new AttachReactor(daemon_, req->session_id(), CallerOf(ctx));
}

grpc::ServerUnaryReactor* GrpcService::CloseSession(
    grpc::CallbackServerContext* ctx, const v1::CloseSessionRequest* req,
    v1::CloseSessionResponse* /*resp*/) {
  return Unary(ctx, [&]() -> absl::Status {
    STOKER_ASSIGN_OR_RETURN(Caller caller, CallerOf(ctx));
    return daemon_->CloseSession(req->session_id(), caller);
  });
}

grpc::ServerUnaryReactor* GrpcService::GetStats(
    grpc::CallbackServerContext* ctx, const v1::GetStatsRequest* /*req*/,
    v1::GetStatsResponse* resp) {
  return Unary(ctx, [&]() -> absl::Status {
    STOKER_ASSIGN_OR_RETURN(Caller caller, CallerOf(ctx));
    *resp->mutable_daemon() = daemon_->GetStats(caller);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(
    Daemon* daemon, const std::string& socket_path, mode_t mode) {
  if (socket_path.empty() || socket_path.size() >= sizeof(sockaddr_un::sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "socket path '", socket_path, "' must be 1..",
        sizeof(sockaddr_un::sun_path) - 1, " characters"));
  }
  STOKER_RETURN_IF_ERROR(shm::ClaimSocketPath(socket_path));
  std::unique_ptr<GrpcServer> server(
      new GrpcServer(socket_path, std::make_unique<GrpcService>(daemon)));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket_path,
                           grpc::InsecureServerCredentials());
  builder.RegisterService(server->service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on unix:", socket_path,
                     " (is the folder there and writable?)"));
  }
  STOKER_RETURN_IF_ERROR(shm::SetSocketMode(socket_path, mode));
  return server;
}

GrpcServer::~GrpcServer() { Shutdown(); }

void GrpcServer::Shutdown(absl::Duration grace) {
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  if (auto* health = server_->GetHealthCheckService()) {
    health->Shutdown();
  }
  server_->Shutdown(std::chrono::system_clock::now() +
                    absl::ToChronoMilliseconds(grace));
  server_->Wait();
  service_->WaitForOffloaded();
  unlink(socket_path_.c_str());
}

}  // namespace stoker
