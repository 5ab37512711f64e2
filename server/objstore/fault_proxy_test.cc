#include "server/objstore/fault_proxy.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/objstore/loopback_testing.h"

namespace stoker {
namespace {

// An upstream that answers each request line's path with a canned reply
// (closing the connection after one that says so), counting the
// connections it was given.
class Upstream {
 public:
  explicit Upstream(std::map<std::string, std::string> replies) : replies_(std::move(replies)) {
    fd_ = loopback_testing::Listen(&port_);
    acceptor_ = std::thread([this] {
      for (;;) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        ++connections_;
        servers_.emplace_back([this, c] { Serve(c); });
      }
    });
  }
  ~Upstream() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    acceptor_.join();
    for (std::thread& t : servers_) t.join();
  }
  uint16_t port() const { return port_; }
  int connections() const { return connections_.load(); }

 private:
  void Serve(int c) {
    std::string in;
    char buf[4096];
    for (;;) {
      size_t end;
      while ((end = in.find("\r\n\r\n")) == std::string::npos) {
        const ssize_t r = ::recv(c, buf, sizeof buf, 0);
        if (r <= 0) {
          ::close(c);
          return;
        }
        in.append(buf, static_cast<size_t>(r));
      }
      const std::string head = in.substr(0, end);
      in.erase(0, end + 4);
      const size_t sp = head.find(' ');
      const std::string path = head.substr(sp + 1, head.find(' ', sp + 1) - sp - 1);
      const std::string& reply = replies_.at(path);
      if (::send(c, reply.data(), reply.size(), MSG_NOSIGNAL) < 0) break;
      if (absl::StrContains(reply, "Connection: close")) break;  // Its end is EOF.
    }
    ::close(c);
  }

  const std::map<std::string, std::string> replies_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<int> connections_{0};
  std::thread acceptor_;
  std::vector<std::thread> servers_;  // Joined at destruction.
};

size_t Append(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// Requests `paths` in turn on one curl handle (one kept connection):
// "<status> <body>" each.
std::vector<std::string> Fetch(const std::string& base, const std::vector<std::string>& paths,
                               bool head_for_head = true) {
  CURL* h = curl_easy_init();
  std::vector<std::string> out;
  for (const std::string& p : paths) {
    std::string body;
    curl_easy_setopt(h, CURLOPT_URL, (base + p).c_str());
    curl_easy_setopt(h, CURLOPT_NOBODY, long{head_for_head && absl::StartsWith(p, "/head")});
    if (!(head_for_head && absl::StartsWith(p, "/head"))) curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &Append);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    out.push_back(absl::StrCat(status, " ", body));
  }
  curl_easy_cleanup(h);
  return out;
}

TEST(FaultProxyTest, KeepsConnectionsAndFramesEveryKindOfReply) {
  Upstream up({
      {"/length", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"},
      {"/chunked",
       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n world\r\n"
       "0\r\nTrailer: t\r\n\r\n"},
      {"/interim", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
      {"/empty", "HTTP/1.1 204 No Content\r\n\r\n"},
      {"/head", "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"},
  });
  FaultProxy::Options o;
  o.upstream_port = up.port();
  auto proxy = FaultProxy::Start(o);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  const std::vector<std::string> got = Fetch(
      (*proxy)->url(), {"/length", "/chunked", "/interim", "/empty", "/head", "/length"});
  EXPECT_EQ(got, (std::vector<std::string>{"200 abc", "200 hello world", "200 ok", "204 ",
                                           "200 ", "200 abc"}));
  // One client connection, so one upstream connection, for all six.
  EXPECT_EQ(up.connections(), 1);
  EXPECT_EQ((*proxy)->counts().forwarded, 6u);
}

TEST(FaultProxyTest, AReplyWithoutALengthEndsTheConnection) {
  Upstream up({
      {"/eof", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nto the end"},
      {"/length", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"},
  });
  FaultProxy::Options o;
  o.upstream_port = up.port();
  auto proxy = FaultProxy::Start(o);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  EXPECT_EQ(Fetch((*proxy)->url(), {"/eof", "/length"}),
            (std::vector<std::string>{"200 to the end", "200 abc"}));
  EXPECT_EQ(up.connections(), 2);  // The first ended at its EOF.
}

TEST(FaultProxyTest, ARequestItCannotFrameIsRefused) {
  Upstream up(std::map<std::string, std::string>{
      {"/length", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"}});
  FaultProxy::Options o;
  o.upstream_port = up.port();
  auto proxy = FaultProxy::Start(o);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  for (const std::string& request :
       {std::string("PUT /length HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "3\r\nabc\r\n0\r\n\r\n"),
        std::string("PUT /length HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
                    "Content-Length: 30\r\n\r\nabc")}) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(std::stoi((*proxy)->url().substr((*proxy)->url().rfind(':') + 1)));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
    char buf[256];
    EXPECT_EQ(::recv(fd, buf, sizeof buf, 0), 0) << request;  // Closed, nothing answered.
    ::close(fd);
  }
  EXPECT_EQ((*proxy)->counts().forwarded, 0u);
  EXPECT_EQ(up.connections(), 0);
}

}  // namespace
}  // namespace stoker
