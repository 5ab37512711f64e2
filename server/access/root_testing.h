// Tests' stand-in for a client proving its dataset's folder: the folder
// served by an in-process opener (shm/open_channel.h) and registered with
// the Authorizer for `uid`, as the ring socket's "STOKER-ROOT 2" exchange
// does. The server must outlive every read of the confinement.
#ifndef STOKER_SERVER_ACCESS_ROOT_TESTING_H_
#define STOKER_SERVER_ACCESS_ROOT_TESTING_H_

#include <unistd.h>

#include <memory>
#include <string>

#include "server/access/authorizer.h"
#include "shm/open_channel.h"

namespace stoker {

struct ServedRoot {
  std::string token;  // For DatasetSpec.root_token; empty if the folder failed to open.
  std::unique_ptr<shm::OpenServer> server;
};

inline ServedRoot RegisterServedRoot(Authorizer& auth, const std::string& folder, uid_t uid) {
  absl::StatusOr<shm::ServedFolder> served = shm::ServeFolder(folder);
  if (!served.ok()) return {};
  ServedRoot root;
  root.token = auth.RegisterRoot(served->folder_fd, served->channel_fd, uid);
  root.server = std::move(served->server);
  return root;
}

}  // namespace stoker

#endif  // STOKER_SERVER_ACCESS_ROOT_TESTING_H_
