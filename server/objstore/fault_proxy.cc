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

// The value of header `name` in `head` (its lines after the first);
// empty if it has none.
absl::string_view Header(absl::string_view head, absl::string_view name) {
  for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(line.substr(0, colon)), name)) {
      return absl::StripAsciiWhitespace(line.substr(colon + 1));
    }
  }
  return {};
}

// Reads one HTTP/1.1 message from `fd` into *out: its head, then a body of
// its Content-Length (none where `bodiless`); *framed is false where the
// message has no length (a reply then ends at EOF, read to it). False at
// EOF before a whole message, or on anything malformed.
bool ReadMessage(int fd, bool bodiless, std::string* out, bool* framed = nullptr) {
  out->clear();
  char buf[64 << 10];
  size_t head_end = std::string::npos;
  while (head_end == std::string::npos) {
    const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    out->append(buf, static_cast<size_t>(r));
    head_end = out->find("\r\n\r\n");
    if (head_end == std::string::npos && out->size() > kMaxHead) return false;
  }
  const absl::string_view head = absl::string_view(*out).substr(0, head_end);
  const absl::string_view length = Header(head, "content-length");
  uint64_t body = 0;
  const bool has_length = !length.empty();
  if (has_length && (!absl::SimpleAtoi(length, &body) || body > kMaxBody)) return false;
  if (framed != nullptr) *framed = bodiless || (has_length && Header(head, "transfer-encoding").empty());
  if (framed != nullptr && !*framed) {  // To EOF.
    for (;;) {
      const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return true;
      out->append(buf, static_cast<size_t>(r));
    }
  }
  const size_t want = head_end + 4 + (bodiless ? 0 : body);
  while (out->size() < want) {
    const ssize_t r = ::recv(fd, buf, std::min(sizeof buf, want - out->size()), 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    out->append(buf, static_cast<size_t>(r));
  }
  return true;
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
  int up = -1;  // The upstream connection, kept while both sides keep theirs.
  while (ReadMessage(client, false, &request)) {
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
    // Forward on the kept upstream connection, or a new one where there is
    // none or it was closed before this request got an answer.
    const bool head_only = absl::StartsWith(request, "HEAD ");
    std::string reply;
    bool framed = false, answered = false;
    for (int tries = 0; tries < 2 && !answered; ++tries) {
      if (up < 0) up = Connect();
      if (up < 0) break;
      answered = WriteAll(up, request.data(), request.size()) &&
                 ReadMessage(up, head_only, &reply, &framed);
      if (!answered) {
        ::close(up);
        up = -1;
      }
    }
    if (!answered) {
      reset = true;
      break;
    }
    forwarded_.fetch_add(1);
    const absl::string_view reply_head =
        absl::string_view(reply).substr(0, reply.find("\r\n\r\n"));
    const bool closing = !framed || absl::EqualsIgnoreCase(Header(reply_head, "connection"),
                                                           "close");
    if (!WriteAll(client, reply.data(), reply.size()) || closing) break;
  }
  if (up >= 0) ::close(up);
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

int FaultProxy::Connect() const {
  const int up = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (up < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(options_.upstream_port);
  ::inet_pton(AF_INET, options_.upstream_host.c_str(), &a.sin_addr);
  if (::connect(up, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(up);
    return -1;
  }
  const int one = 1;
  ::setsockopt(up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return up;
}

}  // namespace stoker
