#include "server/objstore/s3_request.h"

#include <string.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/objstore/s3_xml.h"

namespace stoker {

void WipeSecret(std::string* s) {
  if (s->capacity() > 0) explicit_bzero(s->data(), s->capacity());
  s->clear();
}

S3Credentials::~S3Credentials() {
  WipeSecret(&secret_access_key);
  WipeSecret(&session_token);
}

namespace {

bool AllOf(absl::string_view s, bool (*ok)(unsigned char)) {
  return std::all_of(s.begin(), s.end(),
                     [ok](char c) { return ok(static_cast<unsigned char>(c)); });
}
bool VisibleChar(unsigned char c) { return c > 0x20 && c < 0x7f; }
bool EtagChar(unsigned char c) { return VisibleChar(c) && c != '"'; }

// "bytes a-b/total"; false for anything else.
bool ParseContentRange(absl::string_view v, uint64_t* first, uint64_t* last, uint64_t* total) {
  v = absl::StripAsciiWhitespace(v);
  if (!absl::ConsumePrefix(&v, "bytes ")) return false;
  const size_t dash = v.find('-'), slash = v.find('/');
  if (dash == absl::string_view::npos || slash == absl::string_view::npos || slash < dash) {
    return false;
  }
  return absl::SimpleAtoi(v.substr(0, dash), first) &&
         absl::SimpleAtoi(v.substr(dash + 1, slash - dash - 1), last) &&
         absl::SimpleAtoi(v.substr(slash + 1), total) && *first <= *last && *last < *total;
}

std::string Attempts(int n) { return absl::StrCat(" (after ", n, n == 1 ? " attempt)" : " attempts)"); }

// A 2xx reply against what was asked: its size and range; sets v->size.
absl::Status CheckSuccess(const S3Request& r, const AttemptFacts& f, ObjectVersion* v,
                          const std::string& where) {
  if (r.method == S3Request::Method::kHead) {
    if (!f.has_length) return absl::DataLossError(where + ": HEAD without Content-Length");
    v->size = f.content_length;
    return absl::OkStatus();
  }
  if (r.method != S3Request::Method::kGet) return absl::OkStatus();
  if (r.length == 0) {  // Whole object.
    if (f.http != 200 || (f.has_length && f.content_length != f.body.size())) {
      return absl::DataLossError(absl::StrCat(where, ": a whole read got ", f.body.size(),
                                              " bytes with HTTP ", f.http));
    }
    v->size = f.body.size();
    return absl::OkStatus();
  }
  uint64_t first = 0, last = 0, total = 0;
  if (f.http == 206 && ParseContentRange(f.content_range, &first, &last, &total)) {
    if (first != r.offset || last - first + 1 != f.body.size() ||
        (f.body.size() != r.length && last + 1 != total)) {
      return absl::DataLossError(absl::StrCat(where, ": asked bytes ", r.offset, "+", r.length,
                                              ", got '", f.content_range, "' and ",
                                              f.body.size(), " bytes"));
    }
    v->size = total;
    return absl::OkStatus();
  }
  if (f.http == 200 && r.offset == 0 && f.body.size() <= r.length) {
    // A server that ignores Range for an object no larger than the range.
    v->size = f.body.size();
    return absl::OkStatus();
  }
  return absl::DataLossError(
      absl::StrCat(where, ": a ranged read got HTTP ", f.http, " without its range"));
}

}  // namespace

std::string Named(const S3Request& r) { return absl::StrCat("s3://", r.bucket, "/", r.key); }

absl::Status CheckRequest(const S3Request& r) {
  if (r.credentials == nullptr || r.credentials->access_key_id.empty()) {
    return absl::UnauthenticatedError(absl::StrCat(
        Named(r), ": no object store credentials came with the request (set AWS_ACCESS_KEY_ID "
                  "and AWS_SECRET_ACCESS_KEY, or a profile, where the trainer runs)"));
  }
  const S3Credentials& c = *r.credentials;
  const char* bad = nullptr;
  if (c.access_key_id.size() > 128 || !AllOf(c.access_key_id, IsKeyIdChar)) {
    bad = "access key id";
  } else if (c.remote == nullptr && (c.secret_access_key.empty() ||
                                     c.secret_access_key.size() > 128 ||
                                     !AllOf(c.secret_access_key, VisibleChar))) {
    bad = "secret access key";
  } else if (c.session_token.size() > 4096 || !AllOf(c.session_token, IsTokenChar)) {
    bad = "session token";
  } else if (c.region.empty() || c.region.size() > 32 || !AllOf(c.region, IsRegionChar)) {
    bad = "region";
  } else if (r.if_match.size() > 256 || !AllOf(r.if_match, EtagChar)) {
    bad = "ETag";
  }
  if (bad != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(Named(r), ": the object store ", bad,
                                                   " given has characters or a length no AWS ",
                                                   bad, " has"));
  }
  if (r.length > 0 && r.offset > UINT64_MAX - r.length) {
    return absl::InvalidArgumentError(absl::StrCat(Named(r), ": the range's end overflows"));
  }
  return absl::OkStatus();
}

const char* MethodName(S3Request::Method m) {
  switch (m) {
    case S3Request::Method::kGet:
      return "GET";
    case S3Request::Method::kHead:
      return "HEAD";
    case S3Request::Method::kPut:
      return "PUT";
  }
  return "GET";
}

absl::Status SignRequest(S3Request* r, absl::Time now) {
  const char* method = MethodName(r->method);
  r->host = HostHeader(r->endpoint);
  r->amz_date = AmzDate(now);
  const SigningRequest what{method, r->host, ObjectPath(r->bucket, r->key),
                            CanonicalQuery(r->query), r->amz_date};
  const S3Credentials& c = *r->credentials;
  if (c.remote == nullptr) {
    r->signature = SignV4(what, SigningKey{c.access_key_id, c.secret_access_key,
                                           c.session_token, c.region});
    return absl::OkStatus();
  }
  absl::StatusOr<Signature> s = c.remote(what);
  if (!s.ok()) {
    return absl::Status(s.status().code(),
                        absl::StrCat(Named(*r), ": the trainer's client did not sign the request (",
                                     s.status().message(), ")"));
  }
  if (c.signed_as_named && KeyIdOf(*s) != c.access_key_id) {
    return absl::AbortedError(absl::StrCat(
        Named(*r), ": the trainer's client signed as another key id than the one it named"));
  }
  r->signature = *std::move(s);
  return absl::OkStatus();
}

AttemptVerdict JudgeAttempt(const S3Request& r, AttemptFacts f) {
  AttemptVerdict out;
  S3Reply& reply = out.reply;
  reply.attempts = f.attempt;
  reply.http = f.http;
  const std::string where = absl::StrCat(Named(r), " at ", r.endpoint.ToString());
  const bool success = f.http >= 200 && f.http < 300;
  // An error reply cut at its cap is judged by its status; a cut success
  // is over what was asked.
  if (f.over_cap && (success || f.http == 0)) {
    reply.status = absl::ResourceExhaustedError(
        absl::StrCat(where, ": the reply is larger than the ", f.cap, " bytes asked for"));
    return out;
  }
  if (f.transport != AttemptFacts::Transport::kDone && !f.over_cap) {
    const bool timeout = f.transport == AttemptFacts::Transport::kTimedOut;
    out.retry = f.transport != AttemptFacts::Transport::kFailed;
    out.throttled = timeout;
    reply.status = (timeout ? absl::DeadlineExceededError : absl::UnavailableError)(
        absl::StrCat(where, ": ", f.transport_error, Attempts(f.attempt)));
    return out;
  }
  if (success) {
    reply.version.etag = std::move(f.etag);
    reply.version.version_id = std::move(f.version_id);
    reply.status = CheckSuccess(r, f, &reply.version, where);
    reply.body = std::move(f.body);
    return out;
  }
  const std::string code = S3ErrorCode(f.body);
  const std::string why = absl::StrCat(where, ": HTTP ", f.http, code.empty() ? "" : " ", code);
  // S3's RequestTimeout (400): the connection was idle too long.
  out.retry = f.http == 429 || f.http >= 500 || code == "RequestTimeout";
  out.throttled = f.http == 503 || f.http == 429;
  // Credentials refused: S3 answers some with 400 (an expired or unknown
  // token), some with 403.
  static constexpr absl::string_view kRefused[] = {
      "AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId", "InvalidToken",
      "ExpiredToken", "TokenRefreshRequired"};
  const bool refused =
      std::find(std::begin(kRefused), std::end(kRefused), code) != std::end(kRefused);
  // A HEAD's answer has no body to name its code: one its caller's client
  // signed, refused, may have carried an expired token too.
  const bool remote = r.credentials != nullptr && r.credentials->remote != nullptr;
  reply.expired_token = code == "ExpiredToken" || code == "TokenRefreshRequired" ||
                        (remote && r.method == S3Request::Method::kHead && code.empty() &&
                         (f.http == 400 || f.http == 403));
  if (out.retry) {
    reply.status = absl::UnavailableError(absl::StrCat(why, Attempts(f.attempt)));
  } else if (refused || f.http == 401 || f.http == 403) {
    reply.status = absl::PermissionDeniedError(
        absl::StrCat(why, " (the credentials given may not read bucket ", r.bucket, ")"));
  } else if (f.http == 404) {
    reply.status = absl::NotFoundError(why);
  } else if (f.http == 412) {
    reply.status = absl::FailedPreconditionError(
        absl::StrCat(why, ": the object changed since it was listed"));
  } else if (f.http == 416) {
    reply.status = absl::OutOfRangeError(why);
  } else if (f.http >= 300 && f.http < 500) {
    reply.status =
        absl::InvalidArgumentError(absl::StrCat(why, " (is the region or the endpoint right?)"));
  } else {
    reply.status = absl::InternalError(why);
  }
  return out;
}

}  // namespace stoker
