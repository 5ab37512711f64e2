#include "client/cpp/plain_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "util/status_macros.h"

namespace stoker {
namespace {

constexpr absl::string_view kCrlf = "\r\n";

// Waits up to `left` for `events` on `fd`: false at the timeout.
absl::StatusOr<bool> Wait(int fd, short events, absl::Duration left) {
  for (;;) {
    if (left <= absl::ZeroDuration()) return false;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left) + 1));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return ErrnoStatus(errno, "poll");
  }
}

struct Socket {
  int fd = -1;
  ~Socket() { Reset(); }
  void Reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

// A connection to `a`:`port` within `timeout`, or why not.
absl::Status Connect(const SocketAddress& a, uint16_t port, absl::Duration timeout,
                     Socket* s) {
  sockaddr_storage to = a.storage;
  if (to.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&to)->sin_port = htons(port);
  if (to.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&to)->sin6_port = htons(port);
  s->fd = ::socket(to.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s->fd < 0) return ErrnoStatus(errno, "socket");
  if (::connect(s->fd, reinterpret_cast<const sockaddr*>(&to), a.size) == 0) {
    return absl::OkStatus();
  }
  if (errno != EINPROGRESS) return absl::UnavailableError(std::strerror(errno));
  STOKER_ASSIGN_OR_RETURN(const bool ready, Wait(s->fd, POLLOUT, timeout));
  if (!ready) {
    return absl::UnavailableError(
        absl::StrCat("no connection within ", absl::FormatDuration(timeout)));
  }
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len);
  return err == 0 ? absl::OkStatus() : absl::UnavailableError(std::strerror(err));
}

// The body of a chunked answer from `body` on: nullopt while incomplete.
absl::StatusOr<std::optional<std::string>> Dechunk(absl::string_view body) {
  std::string out;
  for (;;) {
    const size_t eol = body.find(kCrlf);
    if (eol == absl::string_view::npos) return std::nullopt;
    absl::string_view size_text = body.substr(0, eol);
    size_text = absl::StripAsciiWhitespace(size_text.substr(0, size_text.find(';')));
    uint64_t size = 0;
    if (size_text.empty() || size_text.size() > 12 ||
        !absl::SimpleHexAtoi(size_text, &size)) {
      return absl::InvalidArgumentError("malformed chunk size in a chunked answer");
    }
    body.remove_prefix(eol + kCrlf.size());
    if (size == 0) return out;  // Trailers, if any, are not read.
    if (body.size() < size + kCrlf.size()) return std::nullopt;
    if (body.substr(size, kCrlf.size()) != kCrlf) {
      return absl::InvalidArgumentError("a chunk of a chunked answer overruns its size");
    }
    out.append(body.data(), size);
    body.remove_prefix(size + kCrlf.size());
  }
}

}  // namespace

std::string HttpUrl::authority() const {
  const std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return port == 80 ? h : absl::StrCat(h, ":", port);
}

absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view url) {
  constexpr absl::string_view kScheme = "http://";
  if (!absl::StartsWithIgnoreCase(url, kScheme)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "`", url, "` is not an http:// URL", absl::StartsWithIgnoreCase(url, "https://")
                                                 ? " (https is not supported here)"
                                                 : ""));
  }
  absl::string_view rest = url.substr(kScheme.size());
  rest = rest.substr(0, rest.find('#'));
  const size_t end = std::min(rest.find('/'), rest.find('?'));
  absl::string_view authority = rest.substr(0, end);
  HttpUrl u;
  u.target = end == absl::string_view::npos ? "/" : std::string(rest.substr(end));
  if (u.target[0] == '?') u.target.insert(0, "/");
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("`", url, "`: ", why));
  };
  if (authority.find('@') != absl::string_view::npos) return bad("user info is not supported");
  absl::string_view port;
  if (absl::ConsumePrefix(&authority, "[")) {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) return bad("no ] after an IPv6 address");
    u.host = std::string(authority.substr(0, close));
    authority.remove_prefix(close + 1);
    if (!authority.empty() && !absl::ConsumePrefix(&authority, ":")) return bad("junk after ]");
    port = authority;
  } else {
    const size_t colon = authority.find(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != absl::string_view::npos) port = authority.substr(colon + 1);
  }
  if (u.host.empty()) return bad("no host");
  uint32_t p = 80;
  if (!port.empty() && (!absl::SimpleAtoi(port, &p) || p == 0 || p > 65535)) {
    return bad("bad port");
  }
  u.port = static_cast<uint16_t>(p);
  return u;
}

bool SocketAddress::IsLoopback() const {
  if (storage.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&storage);
    return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
  }
  if (storage.ss_family != AF_INET6) return false;
  const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr;
  return IN6_IS_ADDR_LOOPBACK(&a) || (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127);
}

std::string SocketAddress::ToString() const {
  char text[INET6_ADDRSTRLEN] = "";
  if (storage.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, text,
              sizeof text);
  } else if (storage.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, text,
              sizeof text);
  }
  return text;
}

absl::StatusOr<std::vector<SocketAddress>> ResolveHost(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  std::vector<SocketAddress> out;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_addrlen > sizeof(sockaddr_storage)) continue;
    SocketAddress s;
    std::memcpy(&s.storage, a->ai_addr, a->ai_addrlen);
    s.size = a->ai_addrlen;
    out.push_back(s);
  }
  ::freeaddrinfo(found);
  if (out.empty()) return absl::UnavailableError(absl::StrCat(host, " has no address"));
  return out;
}

absl::StatusOr<std::optional<HttpResponse>> ParseHttpResponse(absl::string_view raw,
                                                             bool at_eof) {
  const size_t head_end = raw.find("\r\n\r\n");
  if (head_end == absl::string_view::npos) {
    if (at_eof) return absl::InvalidArgumentError("the answer ended within its head");
    return std::nullopt;
  }
  std::vector<absl::string_view> lines = absl::StrSplit(raw.substr(0, head_end), kCrlf);
  HttpResponse r;
  absl::string_view status_line = lines[0];
  if (!absl::ConsumePrefix(&status_line, "HTTP/1.") || status_line.size() < 5 ||
      status_line[1] != ' ' || !absl::SimpleAtoi(status_line.substr(2, 3), &r.status)) {
    return absl::InvalidArgumentError("the answer is not HTTP/1.x");
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError("a header line of the answer has no ':'");
    }
    r.headers[absl::AsciiStrToLower(absl::StripAsciiWhitespace(lines[i].substr(0, colon)))] =
        std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
  }
  absl::string_view body = raw.substr(head_end + 4);
  const auto encoding = r.headers.find("transfer-encoding");
  const auto length = r.headers.find("content-length");
  if (r.status == 204 || r.status == 304) return r;  // Never a body.
  if (encoding != r.headers.end()) {
    if (!absl::EqualsIgnoreCase(encoding->second, "chunked")) {
      return absl::InvalidArgumentError(
          absl::StrCat("transfer-encoding `", encoding->second, "` is not supported"));
    }
    STOKER_ASSIGN_OR_RETURN(std::optional<std::string> whole, Dechunk(body));
    if (!whole.has_value()) {
      if (at_eof) return absl::InvalidArgumentError("the chunked answer ended early");
      return std::nullopt;
    }
    r.body = std::move(*whole);
    return r;
  }
  if (length != r.headers.end()) {
    uint64_t n = 0;
    if (!absl::SimpleAtoi(length->second, &n)) {
      return absl::InvalidArgumentError("malformed Content-Length in the answer");
    }
    if (body.size() < n) {
      if (at_eof) {
        return absl::InvalidArgumentError(
            absl::StrCat("the answer ended after ", body.size(), " of its ", n, " bytes"));
      }
      return std::nullopt;
    }
    r.body = std::string(body.substr(0, n));
    return r;
  }
  if (!at_eof) return std::nullopt;
  r.body = std::string(body);
  return r;
}

absl::StatusOr<HttpResponse> HttpFetch(const HttpRequest& request) {
  const HttpUrl& url = request.url;
  const std::string where = url.authority();
  std::string text =
      absl::StrCat(request.method, " ", url.target, " HTTP/1.1\r\nHost: ", url.authority(),
                   "\r\nUser-Agent: stoker\r\nAccept: */*\r\nConnection: close\r\n");
  for (const auto& [name, value] : request.headers) {
    if (absl::StrContains(value, "\r") || absl::StrContains(value, "\n")) {
      return absl::InvalidArgumentError(
          absl::StrCat("the value of header ", name, " holds a line break"));
    }
    absl::StrAppend(&text, name, ": ", value, kCrlf);
  }
  if (request.method != "GET" && request.method != "HEAD") text += "Content-Length: 0\r\n";
  text += "\r\n";

  const absl::Time deadline = absl::Now() + request.timeout;
  std::vector<SocketAddress> addresses = request.addresses;
  if (addresses.empty()) {
    STOKER_ASSIGN_OR_RETURN(addresses, ResolveHost(url.host));
  }
  Socket s;
  absl::Status connected;
  for (const SocketAddress& a : addresses) {
    s.Reset();
    const absl::Duration left = std::min(request.connect_timeout, deadline - absl::Now());
    connected = Connect(a, url.port, left, &s);
    if (connected.ok()) break;
    connected = absl::UnavailableError(absl::StrCat("connect to ", where, " (", a.ToString(),
                                                    "): ", connected.message()));
  }
  STOKER_RETURN_IF_ERROR(connected);

  auto timed_out = [&] {
    return absl::DeadlineExceededError(absl::StrCat(
        "no complete answer from ", where, " within ", absl::FormatDuration(request.timeout)));
  };
  for (absl::string_view out = text; !out.empty();) {
    STOKER_ASSIGN_OR_RETURN(const bool ready, Wait(s.fd, POLLOUT, deadline - absl::Now()));
    if (!ready) return timed_out();
    const ssize_t n = ::send(s.fd, out.data(), out.size(), MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) {
      return absl::UnavailableError(absl::StrCat("send to ", where, ": ", std::strerror(errno)));
    }
    out.remove_prefix(static_cast<size_t>(n));
  }
  std::string raw;
  char buf[16384];
  for (;;) {
    STOKER_ASSIGN_OR_RETURN(const bool ready, Wait(s.fd, POLLIN, deadline - absl::Now()));
    if (!ready) return timed_out();
    const ssize_t n = ::recv(s.fd, buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) {
      return absl::UnavailableError(
          absl::StrCat("receive from ", where, ": ", std::strerror(errno)));
    }
    raw.append(buf, static_cast<size_t>(n));
    if (raw.size() > request.max_response) {
      return absl::ResourceExhaustedError(absl::StrCat("the answer of ", where, " is larger than ",
                                                       request.max_response, " bytes"));
    }
    absl::StatusOr<std::optional<HttpResponse>> r = ParseHttpResponse(raw, n == 0);
    if (!r.ok()) {
      return absl::Status(r.status().code(), absl::StrCat(where, ": ", r.status().message()));
    }
    if (r->has_value()) return std::move(**r);
  }
}

}  // namespace stoker
