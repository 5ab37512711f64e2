// One checked connection to a daemon: the socket's folder pinned
// (shm/pinned_socket.h, so neither this check nor gRPC's own reconnects
// can be pointed elsewhere by the owner of a folder above it), the server
// checked by shm/server_trust.h's rule on a connection made before the
// control channel's and on one after, the gRPC channel through the pinned
// folder, and this process's caller token from the ring socket.
//
// A daemon that restarts forgets its tokens, and one that restarts in a
// new folder (systemd's RuntimeDirectory) is out of the pin's reach:
// `Stale` says whether a call's error is one of those, after which the
// caller connects afresh.
//
// Immutable after Connect; thread-safe. Whoever holds the stub (Stub())
// holds the whole connection, its pinned folder included.
#ifndef STOKER_CLIENT_CPP_DAEMON_CONNECTION_H_
#define STOKER_CLIENT_CPP_DAEMON_CONNECTION_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/health.grpc.pb.h"
#include "proto/stoker.grpc.pb.h"
#include "shm/pinned_socket.h"
#include "util/version.h"

namespace stoker {

// The client's gRPC adapters: a call's status as absl's, a deadline `d`
// from now, and who this process is for the daemon (the caller token its
// ring socket gave; none: nothing sent).
absl::Status FromGrpc(const grpc::Status& s);
std::chrono::system_clock::time_point Deadline(absl::Duration d);
void Identify(grpc::ClientContext* ctx, const std::string& token);

class DaemonConnection : public std::enable_shared_from_this<DaemonConnection> {
 public:
  // Connects to unix:`socket_path`, waiting up to `timeout` for the
  // daemon. PERMISSION_DENIED (naming the socket) when this user may not
  // use it, UNAVAILABLE when nothing answers, FAILED_PRECONDITION or
  // PERMISSION_DENIED for a folder or server this process does not trust.
  static absl::StatusOr<std::shared_ptr<const DaemonConnection>> Connect(
      const std::string& socket_path, absl::Duration timeout);

  const std::string& socket_path() const { return at_->path(); }
  // Empty for a daemon without a ring socket (none asked for).
  const std::string& token() const { return token_; }
  // The ring socket, by path: each exchange on it checks the server on
  // its own connection (shm/fd_passing.h), so it needs no pin.
  std::string ring_socket() const;
  // The stub, sharing ownership of this whole connection.
  std::shared_ptr<v1::Stoker::Stub> Stub() const;
  grpc::health::v1::Health::Stub& health() const { return *health_; }

  // Whether a call's UNAVAILABLE, NOT_FOUND (its ring socket gone) or
  // UNAUTHENTICATED `error` means the daemon met at Connect is gone or was
  // restarted: the folder is no longer the one pinned, or the daemon on
  // this connection, asked (a GetStats, at most 2 s), does not answer,
  // knows this process's token no more, or is another process or started
  // at another time. What that daemon itself answered (a store that is
  // down, a dataset that is missing) is not. Other codes: false at once.
  bool Stale(const absl::Status& error) const;
  // Whether the daemon met at Connect (its GetStats: release and session
  // protocol) serves this client's sessions (CheckDaemonProtocol). Checked
  // before each session, not at Connect: stokerctl's stats, health and
  // stop reach a daemon of any release.
  absl::Status CheckProtocol() const;
  // `s` with the pinned path put back as the user named it.
  absl::Status Named(const absl::Status& s) const;

 private:
  struct Daemon {  // Who answers: its pid, when it started, its release.
    uint32_t pid = 0;
    absl::Time started = absl::InfinitePast();
    std::string version;
    uint32_t protocol = 0;
  };
  DaemonConnection() = default;
  // Who answers on this connection now; none (and why) if none does.
  std::optional<Daemon> Answering(absl::Status* error = nullptr) const;

  std::shared_ptr<const shm::PinnedSocket> at_;
  std::string token_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Stoker::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
  Daemon met_;  // At Connect.
};

// OK if a daemon of release `version` speaking session `protocol` (what
// its GetStats says) serves this client, which needs `min_protocol`; else
// FAILED_PRECONDITION naming both releases, the socket and the ways out
// (update the node service, or this package's own embedded daemon).
absl::Status CheckDaemonProtocol(absl::string_view version, uint32_t protocol,
                                 absl::string_view socket_path,
                                 uint32_t min_protocol = kMinDaemonProtocol);

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_DAEMON_CONNECTION_H_
