// Tests' stand-in for the ring handoff socket: an in-process daemon's
// session ring mapped the way a client maps it, from a descriptor
// HandOffRing gives for the response's token. The caller is `uid` (the
// session's owner from then on).
#ifndef STOKER_SERVER_DAEMON_RING_TESTING_H_
#define STOKER_SERVER_DAEMON_RING_TESTING_H_

#include <unistd.h>

#include <memory>

#include "absl/status/statusor.h"
#include "proto/stoker.pb.h"
#include "server/daemon/daemon.h"
#include "shm/ring.h"

namespace stoker {

inline absl::StatusOr<std::unique_ptr<shm::RingConsumer>> TakeRing(
    Daemon& daemon, const v1::OpenSessionResponse& resp, uid_t uid = getuid()) {
  absl::StatusOr<int> fd = daemon.HandOffRing(
      resp.session_id(), resp.ring().handoff_token(), uid, getpid());
  if (!fd.ok()) return fd.status();
  auto ring = shm::RingConsumer::Open(*fd, resp.ring().shm_name(), resp.session_id());
  close(*fd);
  return ring;
}

}  // namespace stoker

#endif  // STOKER_SERVER_DAEMON_RING_TESTING_H_
