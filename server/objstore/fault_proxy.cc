#include "server/objstore/fault_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace stoker {
namespace {

constexpr size_t kMaxHead = 64 << 10;
constexpr uint64_t kMaxBody = uint64_t{1} << 30;

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads one request (head and Content-Length body) from `fd` into *out;
// false at EOF or on anything malformed.
bool ReadRequest(int fd, std::string* out) {
  out->clear();
  char buf[16 << 10];
  size_t head_end = std::string::npos;
  while (head_end == std::string::npos) {
    const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    out->append(buf, static_cast<size_t>(r));
    head_end = out->find("\r\n\r\n");
    if (head_end == std::string::npos && out->size() > kMaxHead) return false;
  }
  uint64_t body = 0;
  for (absl::string_view line : absl::StrSplit(absl::string_view(*out).substr(0, head_end), "\r\n")) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(line.substr(0, colon)),
                               "content-length") &&
        (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(colon + 1)), &body) ||
         body > kMaxBody)) {
      return false;
    }
  }
  const size_t want = head_end + 4 + body;
  while (out->size() < want) {
    const ssize_t r = ::recv(fd, buf, std::min(sizeof buf, want - out->size()), 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    out->append(buf, static_cast<size_t>(r));
  }
  return true;
}

// The request with its Connection header replaced by "close".
std::string Closing(const std::string& request) {
  const size_t head_end = request.find("\r\n\r\n");
  std::string out;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(request).substr(0, head_end), "\r\n")) {
    if (absl::StartsWithIgnoreCase(line, "connection:")) continue;
    absl::StrAppend(&out, line, "\r\n");
  }
  absl::StrAppend(&out, "Connection: close\r\n\r\n", absl::string_view(request).substr(head_end + 4));
  return out;
}

void Reset(int fd) {
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(fd);
}

}  // namespace

absl::StatusOr<std::unique_ptr<FaultProxy>> FaultProxy::Start(Options options) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 512) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int e = errno;
    ::close(fd);
    return absl::InternalError(absl::StrCat("fault proxy listen: ", std::strerror(e)));
  }
  return std::unique_ptr<FaultProxy>(new FaultProxy(std::move(options), fd, ntohs(a.sin_port)));
}

FaultProxy::FaultProxy(Options options, int listener, uint16_t port)
    : options_(std::move(options)), listener_(listener), port_(port) {
  acceptor_ = std::thread([this] { Accept(); });
}

FaultProxy::~FaultProxy() { Stop(); }

void FaultProxy::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (int fd : clients_) ::shutdown(fd, SHUT_RDWR);
  }
  ::shutdown(listener_, SHUT_RDWR);
  acceptor_.join();
  std::vector<std::thread> servers;
  {
    absl::MutexLock lock(&mu_);
    servers.swap(servers_);
  }
  for (std::thread& t : servers) t.join();
  ::close(listener_);
}

FaultProxy::Counts FaultProxy::counts() const {
  return Counts{requests_.load(), forwarded_.load(), slow_downs_.load(), resets_.load()};
}

void FaultProxy::Accept() {
  for (;;) {
    const int c = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // Shut down.
    }
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      ::close(c);
      return;
    }
    clients_.push_back(c);
    // Threads whose connection ended are joined as new ones start.
    for (auto it = servers_.begin(); it != servers_.end();) {
      if (std::find(ended_.begin(), ended_.end(), it->get_id()) != ended_.end()) {
        it->join();
        it = servers_.erase(it);
      } else {
        ++it;
      }
    }
    ended_.clear();
    servers_.emplace_back([this, c] { Serve(c); });
  }
}

int FaultProxy::Decide() {
  absl::MutexLock lock(&mu_);
  const uint64_t n = drawn_++;
  if (n < static_cast<uint64_t>(options_.fail_first)) return 1;
  std::mt19937_64 rng(options_.seed * 0x9E3779B97F4A7C15ull + n);
  const double u = std::uniform_real_distribution<double>(0, 1)(rng);
  if (u < options_.slow_down_share) return 1;
  if (u < options_.slow_down_share + options_.reset_share) return 2;
  return 0;
}

void FaultProxy::Serve(int client) {
  std::string request;
  bool reset = false;
  while (ReadRequest(client, &request)) {
    requests_.fetch_add(1);
    if (options_.latency > absl::ZeroDuration()) absl::SleepFor(options_.latency);
    const int fault = Decide();
    if (fault == 2) {
      resets_.fetch_add(1);
      reset = true;
      break;
    }
    if (fault == 1) {
      slow_downs_.fetch_add(1);
      static constexpr char kBody[] =
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code>"
          "<Message>Please reduce your request rate.</Message></Error>";
      const std::string reply =
          absl::StrCat("HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                       "Content-Length: ", sizeof kBody - 1, "\r\n\r\n", kBody);
      if (!WriteAll(client, reply.data(), reply.size())) break;
      continue;
    }
    // Forward on a fresh upstream connection; the reply ends at its EOF.
    const int up = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(options_.upstream_port);
    ::inet_pton(AF_INET, options_.upstream_host.c_str(), &a.sin_addr);
    if (up < 0 || ::connect(up, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      if (up >= 0) ::close(up);
      reset = true;
      break;
    }
    const std::string sent = Closing(request);
    std::string reply;
    if (WriteAll(up, sent.data(), sent.size())) {
      char buf[64 << 10];
      for (;;) {
        const ssize_t r = ::recv(up, buf, sizeof buf, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        reply.append(buf, static_cast<size_t>(r));
      }
    }
    ::close(up);
    forwarded_.fetch_add(1);
    // The upstream closes after each reply, and so does the proxy: the
    // reply may carry no length (it ended at EOF).
    WriteAll(client, reply.data(), reply.size());
    break;
  }
  // Closed under the lock, so Stop never shuts down a reused number.
  absl::MutexLock lock(&mu_);
  clients_.erase(std::find(clients_.begin(), clients_.end(), client));
  if (reset) {
    Reset(client);
  } else {
    ::shutdown(client, SHUT_WR);
    ::close(client);
  }
  ended_.push_back(std::this_thread::get_id());
}

}  // namespace stoker
