// A TCP listener on 127.0.0.1 at a free port, for the tests' own servers
// (a canned upstream, a store that misbehaves): the listening socket, or
// -1 with a test failure where the system refused one; and a send of all
// of an answer.
#ifndef STOKER_SERVER_OBJSTORE_LOOPBACK_TESTING_H_
#define STOKER_SERVER_OBJSTORE_LOOPBACK_TESTING_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string_view>

#include "gtest/gtest.h"

namespace stoker {
namespace loopback_testing {

inline int Listen(uint16_t* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(fd, 16) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ADD_FAILURE() << "no loopback listener";
    if (fd >= 0) ::close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

// Sends all of `s` on `fd`: false once the peer is gone.
inline bool SendAll(int fd, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    s.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace loopback_testing
}  // namespace stoker

#endif  // STOKER_SERVER_OBJSTORE_LOOPBACK_TESTING_H_
