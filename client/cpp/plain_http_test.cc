#include "client/cpp/plain_http.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "client/cpp/http_testing.h"

namespace stoker {
namespace {

TEST(ParseHttpUrlTest, HostPortAndTarget) {
  absl::StatusOr<HttpUrl> u = ParseHttpUrl("http://169.254.170.2/v2/credentials/abc?x=1#f");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->host, "169.254.170.2");
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->target, "/v2/credentials/abc?x=1");
  EXPECT_EQ(u->authority(), "169.254.170.2");
  u = ParseHttpUrl("HTTP://[fd00:ec2::23]:8080?q");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->host, "fd00:ec2::23");
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->target, "/?q");
  EXPECT_EQ(u->authority(), "[fd00:ec2::23]:8080");
  EXPECT_EQ(ParseHttpUrl("http://localhost")->target, "/");
  absl::Status s = ParseHttpUrl("https://example.com/").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("https is not supported"), std::string::npos) << s;
  for (const char* bad : {"ftp://h/", "http://:80/", "http://h:0/", "http://h:65536/",
                          "http://u:p@h/", "http://[::1/", "http://[::1]x/"}) {
    EXPECT_FALSE(ParseHttpUrl(bad).ok()) << bad;
  }
}

TEST(ParseHttpResponseTest, CompleteByLengthChunksOrEnd) {
  const std::string sized = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A:  b \r\n\r\nhello";
  for (size_t cut = 0; cut < sized.size(); ++cut) {
    absl::StatusOr<std::optional<HttpResponse>> r = ParseHttpResponse(sized.substr(0, cut), false);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(r->has_value()) << cut;
    EXPECT_FALSE(ParseHttpResponse(sized.substr(0, cut), true).ok()) << cut;
  }
  absl::StatusOr<std::optional<HttpResponse>> r = ParseHttpResponse(sized + "junk", false);
  ASSERT_TRUE(r.ok() && r->has_value()) << r.status();
  EXPECT_EQ((*r)->status, 200);
  EXPECT_EQ((*r)->body, "hello");
  EXPECT_EQ((*r)->headers.at("x-a"), "b");

  const std::string chunked =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n"
      "4;ext=1\r\nWiki\r\nB\r\npedia in \r\n\r\n0\r\n\r\n";
  r = ParseHttpResponse(chunked.substr(0, chunked.size() - 5), false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_value());
  r = ParseHttpResponse(chunked, false);
  ASSERT_TRUE(r.ok() && r->has_value()) << r.status();
  EXPECT_EQ((*r)->body, "Wikipedia in \r\n");
  EXPECT_FALSE(ParseHttpResponse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                 "2\r\nabc\r\n0\r\n\r\n", false).ok());
  absl::Status s = ParseHttpResponse("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", true)
                       .status();
  EXPECT_NE(s.message().find("`gzip` is not supported"), std::string::npos) << s;

  const std::string unsized = "HTTP/1.0 404 Not Found\r\nServer: x\r\n\r\nno such";
  EXPECT_FALSE(ParseHttpResponse(unsized, false)->has_value());
  r = ParseHttpResponse(unsized, true);
  ASSERT_TRUE(r.ok() && r->has_value()) << r.status();
  EXPECT_EQ((*r)->status, 404);
  EXPECT_EQ((*r)->body, "no such");
  EXPECT_FALSE(ParseHttpResponse("SSH-2.0-OpenSSH\r\n\r\n", true).ok());
}

TEST(ResolveHostTest, LoopbackOrNot) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"}) {
    absl::StatusOr<std::vector<SocketAddress>> a = ResolveHost(host);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_TRUE(a->at(0).IsLoopback()) << host;
  }
  absl::StatusOr<std::vector<SocketAddress>> a = ResolveHost("fd00:ec2::23");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->at(0).IsLoopback());
  EXPECT_EQ(a->at(0).ToString(), "fd00:ec2::23");
  EXPECT_FALSE(ResolveHost("169.254.170.2")->at(0).IsLoopback());
}

TEST(HttpFetchTest, SendsHeadersAndReadsTheAnswer) {
  http_testing::Server server([](const http_testing::Request& r) {
    if (r.target == "/chunked") {
      return std::string(
          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
    }
    if (r.target == "/big") return http_testing::Answer(200, std::string(1000, 'x'));
    return http_testing::Answer(201, "body of " + r.method);
  });
  HttpRequest req;
  req.method = "PUT";
  req.url = *ParseHttpUrl(server.url("/path?q=1"));
  req.headers = {{"X-Token", "t0k"}};
  absl::StatusOr<HttpResponse> r = HttpFetch(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->body, "body of PUT");
  ASSERT_EQ(server.requests().size(), 1u);
  http_testing::Request seen = server.requests()[0];
  EXPECT_EQ(seen.method, "PUT");
  EXPECT_EQ(seen.target, "/path?q=1");
  EXPECT_EQ(seen.headers["host"], absl::StrCat("127.0.0.1:", server.port()));
  EXPECT_EQ(seen.headers["connection"], "close");
  EXPECT_EQ(seen.headers["content-length"], "0");
  EXPECT_EQ(seen.headers["x-token"], "t0k");

  req.method = "GET";
  req.url = *ParseHttpUrl(server.url("/chunked"));
  r = HttpFetch(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "abc");
  EXPECT_EQ(server.requests().back().headers.count("content-length"), 0u);

  req.url = *ParseHttpUrl(server.url("/big"));
  req.max_response = 500;
  EXPECT_EQ(HttpFetch(req).status().code(), absl::StatusCode::kResourceExhausted);

  req.headers = {{"X-Token", "a\r\nX-Evil: 1"}};
  absl::Status s = HttpFetch(req).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().find("Evil"), std::string::npos) << s;
}

TEST(HttpFetchTest, RefusedAndSilentServers) {
  uint16_t port = 0;
  const int silent = loopback_testing::Listen(&port);  // Accepts (in the kernel), never answers.
  HttpRequest req;
  req.url = *ParseHttpUrl(absl::StrCat("http://127.0.0.1:", port, "/"));
  req.timeout = absl::Milliseconds(200);
  absl::Status s = HttpFetch(req).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  ::close(silent);
  s = HttpFetch(req).status();  // Nothing listens there now.
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find(absl::StrCat("127.0.0.1:", port)), std::string::npos) << s;
}

}  // namespace
}  // namespace stoker
