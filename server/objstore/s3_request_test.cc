#include "server/objstore/s3_request.h"

#include <gtest/gtest.h>

#include <new>
#include <string>

namespace stoker {
namespace {

S3Request Get(uint64_t offset = 0, uint64_t length = 0) {
  S3Request r;
  r.endpoint = *Endpoint::Parse("https://s3.example.com");
  r.bucket = "bkt";
  r.key = "a/b.jpg";
  r.offset = offset;
  r.length = length;
  auto c = std::make_shared<S3Credentials>();
  c->access_key_id = "AKIAEXAMPLE";
  c->secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  r.credentials = c;
  return r;
}

AttemptFacts Answer(long http, std::string body = "", int attempt = 1) {
  AttemptFacts f;
  f.http = http;
  f.body = std::move(body);
  f.attempt = attempt;
  return f;
}

std::string ErrorBody(const char* code) {
  return std::string("<?xml version=\"1.0\"?><Error><Code>") + code +
         "</Code><Message>AKIAEXAMPLE canonical request</Message></Error>";
}

TEST(S3CredentialsTest, SecretsAreOverwrittenBeforeTheirMemoryIsFreed) {
  // A secret in a heap buffer, wiped over its whole capacity.
  std::string secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  secret.reserve(100);
  const char* buffer = secret.data();
  const size_t capacity = secret.capacity();
  WipeSecret(&secret);
  EXPECT_TRUE(secret.empty());
  ASSERT_EQ(secret.data(), buffer);  // Emptied in place, not freed.
  EXPECT_EQ(std::string(buffer, capacity), std::string(capacity, '\0'));

  // Short ones live inside the object: nothing of them is left in its
  // bytes once it is destroyed.
  alignas(S3Credentials) unsigned char storage[sizeof(S3Credentials)];
  auto* c = new (storage) S3Credentials();
  c->secret_access_key = "SHORTSECRETxy";
  c->session_token = "SHORTTOKENxyz";
  const std::string before(reinterpret_cast<char*>(storage), sizeof(storage));
  c->~S3Credentials();
  const std::string after(reinterpret_cast<char*>(storage), sizeof(storage));
  ASSERT_NE(before.find("SHORTSECRETxy"), std::string::npos);  // libstdc++'s 15-char SSO.
  ASSERT_NE(before.find("SHORTTOKENxyz"), std::string::npos);
  EXPECT_EQ(after.find("SHORTSECRETxy"), std::string::npos);
  EXPECT_EQ(after.find("SHORTTOKENxyz"), std::string::npos);
}

TEST(CheckRequestTest, OnlyWhatAHeaderLineCanCarry) {
  EXPECT_TRUE(CheckRequest(Get()).ok());
  S3Request none = Get();
  none.credentials = nullptr;
  EXPECT_EQ(CheckRequest(none).code(), absl::StatusCode::kUnauthenticated);
  auto with = [](void (*edit)(S3Credentials*)) {
    S3Request r = Get();
    auto c = std::make_shared<S3Credentials>(*r.credentials);
    edit(c.get());
    r.credentials = c;
    return CheckRequest(r).code();
  };
  EXPECT_EQ(with([](S3Credentials* c) { c->access_key_id = "AKIA\r\nX: 1"; }),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](S3Credentials* c) { c->secret_access_key = "a b"; }),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](S3Credentials* c) { c->session_token = "tok\nen"; }),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](S3Credentials* c) { c->session_token = std::string(4097, 'a'); }),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](S3Credentials* c) { c->region = "us-east-1:x"; }),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](S3Credentials* c) { c->session_token = "FQoGZXIvYXdz+/=_-.abc"; }),
            absl::StatusCode::kOk);
  S3Request etag = Get();
  etag.if_match = "abc\"\r\nX: 1";
  EXPECT_EQ(CheckRequest(etag).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckRequest(Get(UINT64_MAX - 1, 2)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckRequest(Get(UINT64_MAX - 2, 2)).ok());
}

TEST(JudgeAttemptTest, ErrorsAreNamedRetriedAndThrottledAsS3Means) {
  struct Case {
    long http;
    const char* code;
    absl::StatusCode want;
    bool retry, throttled;
  };
  for (const Case& c : std::vector<Case>{
           {503, "SlowDown", absl::StatusCode::kUnavailable, true, true},
           {429, "", absl::StatusCode::kUnavailable, true, true},
           {500, "InternalError", absl::StatusCode::kUnavailable, true, false},
           {400, "RequestTimeout", absl::StatusCode::kUnavailable, true, false},
           {403, "AccessDenied", absl::StatusCode::kPermissionDenied, false, false},
           {400, "InvalidToken", absl::StatusCode::kPermissionDenied, false, false},
           {400, "ExpiredToken", absl::StatusCode::kPermissionDenied, false, false},
           {403, "SignatureDoesNotMatch", absl::StatusCode::kPermissionDenied, false, false},
           {404, "NoSuchKey", absl::StatusCode::kNotFound, false, false},
           {412, "PreconditionFailed", absl::StatusCode::kFailedPrecondition, false, false},
           {416, "InvalidRange", absl::StatusCode::kOutOfRange, false, false},
           {301, "PermanentRedirect", absl::StatusCode::kInvalidArgument, false, false},
           {400, "AuthorizationHeaderMalformed", absl::StatusCode::kInvalidArgument, false,
            false}}) {
    const AttemptVerdict v = JudgeAttempt(Get(), Answer(c.http, ErrorBody(c.code), 3));
    EXPECT_EQ(v.reply.status.code(), c.want) << c.http << " " << c.code;
    EXPECT_EQ(v.retry, c.retry) << c.http << " " << c.code;
    EXPECT_EQ(v.throttled, c.throttled) << c.http << " " << c.code;
    const std::string m(v.reply.status.message());
    EXPECT_NE(m.find("s3://bkt/a/b.jpg at https://s3.example.com:443"), std::string::npos) << m;
    EXPECT_NE(m.find(c.code), std::string::npos) << m;
    EXPECT_EQ(m.find("canonical request"), std::string::npos) << m;  // Never S3's message.
    if (c.retry) {
      EXPECT_NE(m.find("3 attempts"), std::string::npos) << m;
    }
  }
}

TEST(JudgeAttemptTest, TransportFailures) {
  AttemptFacts f = Answer(0);
  f.transport = AttemptFacts::Transport::kTimedOut;
  f.transport_error = "Timeout was reached";
  AttemptVerdict v = JudgeAttempt(Get(), f);
  EXPECT_EQ(v.reply.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(v.retry);
  EXPECT_TRUE(v.throttled);
  f.transport = AttemptFacts::Transport::kRetryable;
  v = JudgeAttempt(Get(), f);
  EXPECT_EQ(v.reply.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(v.retry);
  EXPECT_FALSE(v.throttled);
  f.transport = AttemptFacts::Transport::kFailed;
  v = JudgeAttempt(Get(), f);
  EXPECT_EQ(v.reply.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(v.retry);
}

TEST(JudgeAttemptTest, RepliesAreCheckedAgainstTheRequest) {
  // A range as asked; its end at the object's end may be short.
  AttemptFacts f = Answer(206, "bcd");
  f.content_range = "bytes 1-3/10";
  f.etag = "e1";
  AttemptVerdict v = JudgeAttempt(Get(1, 3), f);
  ASSERT_TRUE(v.reply.status.ok()) << v.reply.status;
  EXPECT_EQ(v.reply.body, "bcd");
  EXPECT_EQ(v.reply.version.size, 10u);
  EXPECT_EQ(v.reply.version.etag, "e1");
  f.content_range = "bytes 7-9/10";
  f.body = "hij";
  EXPECT_TRUE(JudgeAttempt(Get(7, 8), f).reply.status.ok());
  // Another range, a short one mid-object, or no Content-Range.
  f.content_range = "bytes 2-4/10";
  EXPECT_EQ(JudgeAttempt(Get(1, 3), f).reply.status.code(), absl::StatusCode::kDataLoss);
  f.content_range = "bytes 1-2/10";
  f.body = "bc";
  EXPECT_EQ(JudgeAttempt(Get(1, 3), f).reply.status.code(), absl::StatusCode::kDataLoss);
  f.content_range = "";
  EXPECT_EQ(JudgeAttempt(Get(1, 3), f).reply.status.code(), absl::StatusCode::kDataLoss);
  // A server that ignores Range: fine from 0 when the whole fits.
  f = Answer(200, "abc");
  EXPECT_TRUE(JudgeAttempt(Get(0, 10), f).reply.status.ok());
  EXPECT_EQ(JudgeAttempt(Get(1, 10), f).reply.status.code(), absl::StatusCode::kDataLoss);
  // A whole read shorter than its Content-Length.
  f.has_length = true;
  f.content_length = 5;
  EXPECT_EQ(JudgeAttempt(Get(), f).reply.status.code(), absl::StatusCode::kDataLoss);
  // A HEAD needs its length.
  S3Request head = Get();
  head.method = S3Request::Method::kHead;
  EXPECT_EQ(JudgeAttempt(head, Answer(200)).reply.status.code(), absl::StatusCode::kDataLoss);
  f = Answer(200);
  f.has_length = true;
  f.content_length = 1234;
  v = JudgeAttempt(head, f);
  ASSERT_TRUE(v.reply.status.ok());
  EXPECT_EQ(v.reply.version.size, 1234u);
  // Over its cap: a success is RESOURCE_EXHAUSTED, an error keeps its status.
  f = Answer(200, "abc");
  f.over_cap = true;
  f.cap = 3;
  f.transport = AttemptFacts::Transport::kFailed;
  EXPECT_EQ(JudgeAttempt(Get(), f).reply.status.code(), absl::StatusCode::kResourceExhausted);
  f.http = 503;
  f.body = ErrorBody("SlowDown");
  v = JudgeAttempt(Get(), f);
  EXPECT_EQ(v.reply.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(v.retry);
}

}  // namespace
}  // namespace stoker
