// A loopback HTTP server for the client's tests: each connection's
// request head is handed to the test's handler, whose return (the raw
// bytes of an answer: status line, headers, body) is sent before the
// connection is closed. It keeps every request it saw. Connections are
// served one at a time, by one thread; the destructor stops and joins it.
#ifndef STOKER_CLIENT_CPP_HTTP_TESTING_H_
#define STOKER_CLIENT_CPP_HTTP_TESTING_H_

#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "server/objstore/loopback_testing.h"

namespace stoker {
namespace http_testing {

struct Request {
  std::string method, target;
  std::map<std::string, std::string> headers;  // Names lower-cased.
};

// The raw bytes of an answer with `status` and `body` (and its length).
inline std::string Answer(int status, const std::string& body) {
  return absl::StrCat("HTTP/1.1 ", status, " X\r\nContent-Length: ", body.size(), "\r\n\r\n",
                      body);
}

class Server {
 public:
  using Handler = std::function<std::string(const Request&)>;

  explicit Server(Handler handler) : handler_(std::move(handler)) {
    listener_ = loopback_testing::Listen(&port_);
    if (listener_ >= 0) thread_ = std::thread([this] { Serve(); });
  }
  ~Server() {
    if (listener_ >= 0) ::shutdown(listener_, SHUT_RDWR);  // Wakes accept.
    if (thread_.joinable()) thread_.join();
    if (listener_ >= 0) ::close(listener_);
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  uint16_t port() const { return port_; }
  std::string url(const std::string& path = "/") const {
    return absl::StrCat("http://127.0.0.1:", port_, path);
  }
  std::vector<Request> requests() const {
    absl::MutexLock lock(&mu_);
    return requests_;
  }

 private:
  void Serve() {
    for (;;) {
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      std::string in;
      char buf[4096];
      ssize_t n = 0;
      while (in.find("\r\n\r\n") == std::string::npos && (n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
        in.append(buf, static_cast<size_t>(n));
      }
      Request r;
      std::vector<std::string> lines =
          absl::StrSplit(in.substr(0, in.find("\r\n\r\n")), "\r\n");
      std::vector<std::string> first = absl::StrSplit(lines[0], ' ');
      r.method = first[0];
      r.target = first.size() > 1 ? first[1] : "";
      for (size_t i = 1; i < lines.size(); ++i) {
        const size_t colon = lines[i].find(':');
        if (colon == std::string::npos) continue;
        r.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
            std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
      }
      {
        absl::MutexLock lock(&mu_);
        requests_.push_back(r);
      }
      const std::string answer = handler_(r);
      loopback_testing::SendAll(fd, answer);
      ::close(fd);
    }
  }

  const Handler handler_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::vector<Request> requests_ ABSL_GUARDED_BY(mu_);
};

}  // namespace http_testing
}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_HTTP_TESTING_H_
