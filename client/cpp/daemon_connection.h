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

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/health.grpc.pb.h"
#include "proto/stoker.grpc.pb.h"
#include "shm/pinned_socket.h"

namespace stoker {

class DaemonConnection {
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

  // Whether `error`, from a call on this connection, says the daemon is
  // gone or restarted: its token unknown (UNAUTHENTICATED), or no daemon
  // there (UNAVAILABLE, or NOT_FOUND for its ring socket, while the channel
  // is not connected or the folder is no longer the one pinned). What the
  // daemon itself answered (a store that is down) is not.
  bool Stale(const absl::Status& error) const;

 private:
  DaemonConnection() = default;
  std::shared_ptr<const shm::PinnedSocket> at_;
  std::string token_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Stoker::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
  std::weak_ptr<const DaemonConnection> self_;
};

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_DAEMON_CONNECTION_H_
