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

// The values of header `name` in `head` (its lines after the first).
std::vector<absl::string_view> Headers(absl::string_view head, absl::string_view name) {
  std::vector<absl::string_view> out;
  for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(line.substr(0, colon)), name)) {
      out.push_back(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
  }
  return out;
}

// A connection's bytes, read as messages: what was read past one message
// is the next one's start.
class Conn {
 public:
  explicit Conn(int fd) : fd_(fd) {}

  // Appends the bytes up to and including `delim` from the connection to
  // *out; false at EOF or past `most` bytes.
  bool ReadUntil(absl::string_view delim, size_t most, std::string* out) {
    for (;;) {
      const size_t at = carry_.find(delim.data(), 0, delim.size());
      if (at != std::string::npos) {
        out->append(carry_, 0, at + delim.size());
        carry_.erase(0, at + delim.size());
        return true;
      }
      if (carry_.size() > most || !Fill()) return false;
    }
  }
  // Appends `n` bytes to *out; false at EOF first.
  bool ReadBytes(uint64_t n, std::string* out) {
    while (carry_.size() < n) {
      if (!Fill()) return false;
    }
    out->append(carry_, 0, n);
    carry_.erase(0, n);
    return true;
  }
  // Appends everything to EOF.
  void ReadToEof(std::string* out) {
    while (Fill()) {
    }
    out->append(carry_);
    carry_.clear();
  }

 private:
  bool Fill() {
    char buf[64 << 10];
    for (;;) {
      const ssize_t r = ::recv(fd_, buf, sizeof buf, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      carry_.append(buf, static_cast<size_t>(r));
      return true;
    }
  }

  const int fd_;
  std::string carry_;
};

// A message's Content-Length: -1 without one; false for two, or one that
// is not a number or over kMaxBody.
bool ContentLength(absl::string_view head, int64_t* length) {
  const std::vector<absl::string_view> v = Headers(head, "content-length");
  uint64_t n = 0;
  if (v.size() > 1 || (v.size() == 1 && (!absl::SimpleAtoi(v[0], &n) || n > kMaxBody))) {
    return false;
  }
  *length = v.empty() ? -1 : static_cast<int64_t>(n);
  return true;
}

// Reads one request into *out: its head and a Content-Length body (a
// request with Transfer-Encoding is refused); false at EOF or on anything
// malformed.
bool ReadRequest(Conn& c, std::string* out) {
  out->clear();
  if (!c.ReadUntil("\r\n\r\n", kMaxHead, out)) return false;
  int64_t length = 0;
  if (!ContentLength(*out, &length) || !Headers(*out, "transfer-encoding").empty()) return false;
  return length <= 0 || c.ReadBytes(static_cast<uint64_t>(length), out);
}

// Reads the reply to a request (`head_only` for HEAD) into *out: interim
// 1xx replies, then the final one, whose body is none (HEAD, 204, 304),
// its Content-Length, its chunks, or else everything to EOF (*to_eof set:
// the connection then ends). False at EOF before a whole reply, or on
// anything malformed.
bool ReadReply(Conn& c, bool head_only, std::string* out, bool* to_eof) {
  out->clear();
  *to_eof = false;
  for (;;) {
    const size_t start = out->size();
    if (!c.ReadUntil("\r\n\r\n", kMaxHead, out)) return false;
    const absl::string_view head = absl::string_view(*out).substr(start);
    int status = 0;
    const std::vector<absl::string_view> first = absl::StrSplit(head.substr(0, head.find("\r\n")), ' ');
    if (first.size() < 2 || !absl::SimpleAtoi(first[1], &status)) return false;
    if (status >= 100 && status < 200) continue;  // Interim: the final one follows.
    int64_t length = 0;
    if (!ContentLength(head, &length)) return false;
    const std::vector<absl::string_view> coding = Headers(head, "transfer-encoding");
    if (head_only || status == 204 || status == 304) return true;
    if (!coding.empty()) {
      if (!absl::EqualsIgnoreCase(coding.back(), "chunked")) {
        *to_eof = true;
        c.ReadToEof(out);
        return true;
      }
      for (;;) {  // Chunks, then the trailer.
        const size_t line = out->size();
        if (!c.ReadUntil("\r\n", kMaxHead, out)) return false;
        uint64_t n = 0;
        absl::string_view size = absl::string_view(*out).substr(line);
        size = size.substr(0, size.find_first_of(";\r"));
        if (!absl::SimpleHexAtoi(size, &n) || n > kMaxBody) return false;
        if (n == 0) {  // The trailer's lines, to an empty one.
          for (;;) {
            const size_t at = out->size();
            if (!c.ReadUntil("\r\n", kMaxHead, out)) return false;
            if (out->size() - at == 2) return true;
          }
        }
        if (!c.ReadBytes(n + 2, out)) return false;
      }
    }
    if (length < 0) {
      *to_eof = true;
      c.ReadToEof(out);
      return true;
    }
    return c.ReadBytes(static_cast<uint64_t>(length), out);
  }
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
  Conn from(client);
  // The upstream connection, kept while both sides keep theirs.
  int up = -1;
  std::unique_ptr<Conn> to;
  bool reused = false;
  while (ReadRequest(from, &request)) {
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
    // Forward on the kept upstream connection, or a new one. A GET or HEAD
    // whose kept connection was closed before any answer is sent once more
    // on a new one; nothing else is repeated.
    const bool head_only = absl::StartsWith(request, "HEAD ");
    const bool repeatable = head_only || absl::StartsWith(request, "GET ");
    std::string reply;
    bool to_eof = false, answered = false;
    for (int tries = 0; tries < 2 && !answered; ++tries) {
      if (up < 0) {
        up = Connect();
        if (up < 0) break;
        to = std::make_unique<Conn>(up);
        reused = false;
      }
      answered = WriteAll(up, request.data(), request.size()) &&
                 ReadReply(*to, head_only, &reply, &to_eof);
      if (!answered) {
        Disconnect(up);
        up = -1;
        if (!reused || !repeatable || !reply.empty()) break;
      }
    }
    if (!answered) {
      reset = true;
      break;
    }
    reused = true;
    forwarded_.fetch_add(1);
    const absl::string_view head = absl::string_view(reply).substr(0, reply.find("\r\n\r\n"));
    const std::vector<absl::string_view> connection = Headers(head, "connection");
    const bool closing = to_eof || absl::StartsWith(head, "HTTP/1.0") ||
                         (!connection.empty() && absl::EqualsIgnoreCase(connection[0], "close"));
    if (!WriteAll(client, reply.data(), reply.size()) || closing) break;
  }
  if (up >= 0) Disconnect(up);
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

void FaultProxy::Disconnect(int up) {
  absl::MutexLock lock(&mu_);
  clients_.erase(std::find(clients_.begin(), clients_.end(), up));
  ::close(up);
}

int FaultProxy::Connect() {
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
  // Listed with the clients' connections, so Stop shuts it down too.
  absl::MutexLock lock(&mu_);
  if (stopping_) {
    ::close(up);
    return -1;
  }
  clients_.push_back(up);
  return up;
}

}  // namespace stoker
