// A loopback HTTP/1.1 server that stands in for an object store that is
// slow or failing: it answers every request (any method, any path) with
// `status` (or only the first `errors`, then 200), and a 200's body of `bytes` bytes is sent `chunk` bytes at a
// time, `interval` apart (a store that drips). It counts the requests
// that arrived and the answers the client hung up on before their end,
// and tests wait for either count (never for time).
//
// A connection is served by a thread of its own and kept alive across
// requests. Thread-safe; the destructor closes the listener and every
// connection, then joins the threads.
#ifndef STOKER_SERVER_OBJSTORE_DRIP_SERVER_TESTING_H_
#define STOKER_SERVER_OBJSTORE_DRIP_SERVER_TESTING_H_

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/objstore/loopback_testing.h"

namespace stoker {
namespace drip_testing {

class DripServer {
 public:
  struct Options {
    int status = 200;  // 200, or an error answered at once with `error_body`.
    std::string error_body;
    int errors = -1;  // How many requests get `status`, then 200s (-1: all).
    uint64_t bytes = 1 << 20;
    size_t chunk = 1;
    absl::Duration interval = absl::Milliseconds(100);
  };

  explicit DripServer(Options o) : options_(o) {
    listener_ = loopback_testing::Listen(&port_);
    if (listener_ >= 0) acceptor_ = std::thread([this] { Accept(); });
  }

  ~DripServer() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      for (int fd : connections_) ::shutdown(fd, SHUT_RDWR);  // Wakes their poll.
    }
    if (listener_ >= 0) ::shutdown(listener_, SHUT_RDWR);  // Wakes accept.
    if (acceptor_.joinable()) acceptor_.join();
    for (std::thread& t : servers_) t.join();
    if (listener_ >= 0) ::close(listener_);
  }

  DripServer(const DripServer&) = delete;
  DripServer& operator=(const DripServer&) = delete;

  std::string url() const { return absl::StrCat("http://127.0.0.1:", port_); }

  // The body of a 200: `bytes` bytes of a fixed pattern.
  static std::string Body(uint64_t bytes) {
    std::string b(bytes, '\0');
    for (uint64_t i = 0; i < bytes; ++i) b[i] = static_cast<char>('a' + i % 26);
    return b;
  }

  // Blocks until `n` requests have arrived.
  void WaitForRequests(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return requests_ >= n; };
    mu_.Await(absl::Condition(&reached));
  }
  // Blocks until the client has hung up on `n` answers before their end.
  void WaitForHangUps(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return hang_ups_ >= n; };
    mu_.Await(absl::Condition(&reached));
  }
  int requests() const {
    absl::MutexLock lock(&mu_);
    return requests_;
  }
  // Each request's head (its request line and headers), in order.
  std::vector<std::string> heads() const {
    absl::MutexLock lock(&mu_);
    return heads_;
  }

 private:
  void Accept() {
    for (;;) {
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      absl::MutexLock lock(&mu_);
      if (fd < 0 || stopping_) {
        if (fd >= 0) ::close(fd);
        return;
      }
      connections_.push_back(fd);
      servers_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  // Waits up to `d` for the client to hang up (or the server to stop):
  // true if it did.
  static bool HungUp(int fd, absl::Duration d) {
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(d))) <= 0) return false;
    char c;
    return ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
  }

  static bool Send(int fd, absl::string_view s) {
    return loopback_testing::SendAll(fd, std::string_view(s.data(), s.size()));
  }

  void Serve(int fd) {
    std::string in;
    char buf[4096];
    const std::string body = Body(options_.bytes);
    for (;;) {
      const size_t end = in.find("\r\n\r\n");
      if (end == std::string::npos) {
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
        continue;
      }
      bool error;
      {
        absl::MutexLock lock(&mu_);
        heads_.push_back(in.substr(0, end));
        error = options_.status != 200 && (options_.errors < 0 || requests_ < options_.errors);
        ++requests_;
      }
      in.erase(0, end + 4);  // No request of the client's has a body.
      if (error) {
        if (!Send(fd, absl::StrCat("HTTP/1.1 ", options_.status, " Error\r\nContent-Length: ",
                                   options_.error_body.size(), "\r\n\r\n",
                                   options_.error_body))) {
          break;
        }
        continue;
      }
      if (!Send(fd, absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", body.size(),
                                 "\r\nETag: \"drip\"\r\n\r\n"))) {
        break;
      }
      bool whole = true;
      for (size_t at = 0; at < body.size(); at += options_.chunk) {
        if (at > 0 && HungUp(fd, options_.interval)) {
          whole = false;
          break;
        }
        const size_t n = std::min(options_.chunk, body.size() - at);
        if (!Send(fd, absl::string_view(body).substr(at, n))) {
          whole = false;
          break;
        }
      }
      if (!whole) {
        absl::MutexLock lock(&mu_);
        if (!stopping_) ++hang_ups_;
        break;
      }
    }
    absl::MutexLock lock(&mu_);
    connections_.erase(std::find(connections_.begin(), connections_.end(), fd));
    ::close(fd);
  }

  const Options options_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::thread acceptor_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int requests_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> heads_ ABSL_GUARDED_BY(mu_);
  int hang_ups_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int> connections_ ABSL_GUARDED_BY(mu_);
  // Joined by the destructor (started only by Accept, which it joins first).
  std::vector<std::thread> servers_;
};

}  // namespace drip_testing
}  // namespace stoker

#endif  // STOKER_SERVER_OBJSTORE_DRIP_SERVER_TESTING_H_
