#include "client/cpp/daemon_connection.h"

#include <unistd.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "shm/fd_passing.h"
#include "util/status_macros.h"
#include "util/version.h"

namespace stoker {

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

std::chrono::system_clock::time_point Deadline(absl::Duration d) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(d);
}

void Identify(grpc::ClientContext* ctx, const std::string& token) {
  if (!token.empty()) ctx->AddMetadata(shm::kCallerTokenMetadata, token);
}

absl::StatusOr<std::shared_ptr<const DaemonConnection>> DaemonConnection::Connect(
    const std::string& socket_path, absl::Duration timeout) {
  const auto deadline = Deadline(timeout);
  // Who serves there: the socket's folder must be writable only by its
  // owner, and the server must run as a user this process trusts. Checked
  // now if something listens already (a plain connect first, so a socket
  // this user may not use reads as PERMISSION_DENIED naming it, not as a
  // daemon that does not answer), and again once the daemon answers.
  std::shared_ptr<DaemonConnection> c(new DaemonConnection);
  STOKER_ASSIGN_OR_RETURN(c->at_, shm::PinnedSocket::Pin(socket_path));
  const std::shared_ptr<const shm::PinnedSocket>& at = c->at_;
  absl::StatusOr<int> probe = shm::ConnectUnix(at->pinned(), timeout);
  if (!probe.ok() && probe.status().code() == absl::StatusCode::kPermissionDenied) {
    return c->Named(probe.status());
  }
  if (probe.ok()) {
    absl::Status verified = shm::VerifyServer(*probe, *at);
    close(*probe);
    STOKER_RETURN_IF_ERROR(verified);
  }
  grpc::ChannelArguments args;
  // Its own subchannels: none shared by address with another channel, so
  // nothing connects through this pin's path once the pin is gone.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  c->channel_ = grpc::CreateCustomChannel("unix:" + at->pinned(),
                                          grpc::InsecureChannelCredentials(), args);
  if (!c->channel_->WaitForConnected(deadline)) {
    return absl::UnavailableError(absl::StrCat("no stokerd answering on unix:", socket_path,
                                               " within ", absl::FormatDuration(timeout)));
  }
  // Then this process's caller token, from the ring socket the daemon opens
  // before its control socket (none: a daemon that asks for none).
  absl::StatusOr<int> sock = shm::ConnectUnix(at->pinned(), timeout);
  if (!sock.ok()) return c->Named(sock.status());
  absl::Status verified = shm::VerifyServer(*sock, *at);
  close(*sock);
  STOKER_RETURN_IF_ERROR(verified);
  const std::string ring = c->ring_socket();
  if (access(ring.c_str(), F_OK) == 0) {
    STOKER_ASSIGN_OR_RETURN(c->token_, shm::RequestCallerToken(ring));
  }
  c->stub_ = v1::Stoker::NewStub(c->channel_);
  c->health_ = grpc::health::v1::Health::NewStub(c->channel_);
  c->met_ = c->Answering().value_or(Daemon{});
  return std::shared_ptr<const DaemonConnection>(std::move(c));
}

std::optional<DaemonConnection::Daemon> DaemonConnection::Answering(
    absl::Status* error) const {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(absl::Seconds(2)));
  Identify(&ctx, token_);
  v1::GetStatsResponse resp;
  const absl::Status s = FromGrpc(stub_->GetStats(&ctx, v1::GetStatsRequest(), &resp));
  if (!s.ok()) {
    if (error != nullptr) *error = s;
    return std::nullopt;
  }
  return Daemon{resp.daemon().pid(),
                absl::Now() - absl::Seconds(resp.daemon().uptime_seconds()),
                resp.daemon().version(), resp.daemon().protocol()};
}

absl::Status DaemonConnection::CheckProtocol() const {
  if (met_.pid == 0) return absl::OkStatus();  // It did not say at Connect.
  return CheckDaemonProtocol(met_.version, met_.protocol, at_->path());
}

std::string DaemonConnection::ring_socket() const { return shm::RingSocketPath(at_->path()); }

std::shared_ptr<v1::Stoker::Stub> DaemonConnection::Stub() const {
  return std::shared_ptr<v1::Stoker::Stub>(shared_from_this(), stub_.get());
}

bool DaemonConnection::Stale(const absl::Status& error) const {
  if (error.code() != absl::StatusCode::kUnauthenticated &&
      error.code() != absl::StatusCode::kUnavailable &&
      error.code() != absl::StatusCode::kNotFound) {  // Its ring socket gone.
    return false;
  }
  if (!at_->Current()) return true;
  // Asked, not guessed from the error (a daemon answers UNAUTHENTICATED
  // for a session without credentials, NOT_FOUND for a missing dataset).
  absl::Status asked;
  const std::optional<Daemon> now = Answering(&asked);
  if (!now.has_value()) {
    return asked.code() == absl::StatusCode::kUnavailable ||       // Gone.
           asked.code() == absl::StatusCode::kUnauthenticated ||   // Forgot us.
           asked.code() == absl::StatusCode::kDeadlineExceeded;
  }
  return now->pid != met_.pid || absl::AbsDuration(now->started - met_.started) > absl::Seconds(5);
}

absl::Status DaemonConnection::Named(const absl::Status& s) const {
  if (s.ok() || at_->pinned() == at_->path()) return s;
  return absl::Status(s.code(), absl::StrReplaceAll(s.message(), {{at_->pinned(), at_->path()}}));
}

absl::Status CheckDaemonProtocol(absl::string_view version, uint32_t protocol,
                                 absl::string_view socket_path, uint32_t min_protocol) {
  if (protocol >= min_protocol) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "stokerd ", version.empty() ? "(release unknown)" : version, " at ", socket_path,
      " speaks session protocol ", protocol, "; this client (stoker ", kVersion,
      ") needs ", min_protocol,
      " or newer: update the node service, or (from Python) set "
      "STOKER_SOCKET=embedded to use that package's own daemon"));
}

}  // namespace stoker
