// A small blocking HTTP/1.1 client over plain TCP, for the credential
// endpoints a trainer may be given on its own host or link (a container's
// credentials, the instance metadata service): no TLS, no proxies, no
// redirects, one request a connection ("Connection: close"). Each call
// gives up at its connect timeout (per address tried) and at its overall
// timeout; an answer is read to the end of its Content-Length, of its
// chunked body, or of the connection, and one larger than max_response
// bytes (head and body) is RESOURCE_EXHAUSTED. Errors name the host and
// what failed, never a header's value. Stateless; thread-safe.
#ifndef STOKER_CLIENT_CPP_PLAIN_HTTP_H_
#define STOKER_CLIENT_CPP_PLAIN_HTTP_H_

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace stoker {

struct HttpUrl {
  std::string host;  // A name or an address; IPv6 without its brackets.
  uint16_t port = 80;
  std::string target = "/";  // Path and query.
  // "host[:port]" as a Host header writes it.
  std::string authority() const;
};

// An http:// URL; INVALID_ARGUMENT for anything else (https:// included:
// this client has no TLS).
absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view url);

// One address a host name resolved to.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t size = 0;
  bool IsLoopback() const;  // 127.0.0.0/8 or ::1 (or ::ffff:127.x.y.z).
  std::string ToString() const;  // "127.0.0.1", "fd00:ec2::23".
};

// The addresses of `host` (a name or an address) for a TCP connection.
absl::StatusOr<std::vector<SocketAddress>> ResolveHost(const std::string& host);

struct HttpRequest {
  std::string method = "GET";
  HttpUrl url;
  std::vector<std::pair<std::string, std::string>> headers;  // Host, Connection added.
  // Where to connect, in order (the first that answers); empty: `url.host`
  // resolved.
  std::vector<SocketAddress> addresses;
  absl::Duration connect_timeout = absl::Seconds(2);
  absl::Duration timeout = absl::Seconds(5);  // The whole exchange.
  size_t max_response = 1 << 20;
};

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // Names lower-cased.
  std::string body;                             // Chunked bodies decoded.
};

// The answer of any status; an error only where none came: UNAVAILABLE
// (no connection), DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, or
// INVALID_ARGUMENT for an answer that is not HTTP/1.x.
absl::StatusOr<HttpResponse> HttpFetch(const HttpRequest& request);

// What the reply bytes `raw` (head and body) make: the response once it
// is complete (by its Content-Length, by its chunked body's end, or, with
// neither, by `at_eof`: the connection ended there), nullopt while more is
// to come, INVALID_ARGUMENT where it is malformed or ends early.
absl::StatusOr<std::optional<HttpResponse>> ParseHttpResponse(absl::string_view raw,
                                                             bool at_eof);

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_PLAIN_HTTP_H_
