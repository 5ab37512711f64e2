#include "server/objstore/s3_attempt.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/objstore/ca_bundle.h"
#include "server/objstore/s3_address.h"

namespace stoker {
namespace {

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* w = static_cast<AttemptWire*>(user);
  long http = 0;
  if (w->facts.body.empty()) curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &http);
  return TakeBody(absl::string_view(data, size * n), http, &w->facts) ? size * n : 0;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  TakeHeaderLine(absl::string_view(data, size * n), &static_cast<AttemptWire*>(user)->facts);
  return size * n;
}

// A raised cancellation aborts the transfer (CURLE_ABORTED_BY_CALLBACK).
int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<AttemptWire*>(user)->cancel->cancelled() ? 1 : 0;
}

}  // namespace

void TakeHeaderLine(absl::string_view line, AttemptFacts* f) {
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos) {
    // A status line: a new response (after a 100 Continue) starts over.
    if (absl::StartsWith(line, "HTTP/")) {
      const uint64_t cap = f->cap;
      const int attempt = f->attempt;
      *f = AttemptFacts{};
      f->cap = cap;
      f->attempt = attempt;
    }
    return;
  }
  const std::string name = absl::AsciiStrToLower(line.substr(0, colon));
  const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
  if (value.size() > 1024) return;  // No header we read is this long.
  if (name == "etag") {
    f->etag = std::string(absl::StripSuffix(absl::StripPrefix(value, "\""), "\""));
  } else if (name == "x-amz-version-id") {
    f->version_id = std::string(value);
  } else if (name == "content-range") {
    f->content_range = std::string(value);
  } else if (name == "content-length") {
    f->has_length = absl::SimpleAtoi(value, &f->content_length);
  }
}

bool TakeBody(absl::string_view data, long http, AttemptFacts* f) {
  if (f->body.empty()) {
    // An error's body (S3's XML) is read to its cap, not the range's.
    if (http < 200 || http >= 300) f->cap = kMaxErrorBody;
    // The body's length is known (and within the cap): one allocation,
    // not a string doubling through an 8 MiB block (up to 64 MiB: the
    // store's word, not yet its bytes).
    if (f->has_length && f->content_length <= f->cap) {
      f->body.reserve(std::min<uint64_t>(f->content_length, uint64_t{64} << 20));
    }
  }
  if (f->body.size() + data.size() > f->cap) {
    f->over_cap = true;
    return false;  // Aborts the transfer (CURLE_WRITE_ERROR).
  }
  f->body.append(data.data(), data.size());
  return true;
}

absl::Status PrepareAttempt(const S3Request& r, int attempt, absl::Duration time,
                            const AttemptOptions& o, void* owner, AttemptWire* w) {
  w->facts = AttemptFacts{};
  w->facts.attempt = attempt;
  w->facts.cap = r.method == S3Request::Method::kGet && r.length > 0
                     ? std::min(r.length, o.max_reply_bytes)
                     : o.max_reply_bytes;
  w->cancel = r.cancel.get();
  CURL* h = curl_easy_init();
  if (h == nullptr) return absl::ResourceExhaustedError("curl_easy_init");
  w->easy = h;
  std::string url = absl::StrCat(r.endpoint.ToString(), ObjectPath(r.bucket, r.key));
  if (!r.query.empty()) absl::StrAppend(&url, "?", CanonicalQuery(r.query));
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);  // A key's "../" is the key's.
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
  const std::string& ca = o.ca_file.empty() ? SystemCaBundle() : o.ca_file;
  if (!ca.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, ca.c_str());
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   long(absl::ToInt64Milliseconds(o.connect_timeout)));
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
                   long(std::max<int64_t>(1, absl::ToInt64Milliseconds(time))));
  if (o.low_speed_bytes > 0) {
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, long(o.low_speed_bytes));
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, long(absl::ToInt64Seconds(o.low_speed_time)));
  }
  w->error[0] = '\0';
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, w->error);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, w);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, w);
  curl_easy_setopt(h, CURLOPT_PRIVATE, owner);
  if (w->cancel != nullptr) {
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, &OnProgress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, w);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  }
  curl_slist* hs = nullptr;
  auto add = [&](const std::string& header) { hs = curl_slist_append(hs, header.c_str()); };
  // The headers SignRequest signed, as it signed them.
  add(absl::StrCat("Host: ", r.host));
  add(absl::StrCat("x-amz-date: ", r.amz_date));
  add(absl::StrCat("x-amz-content-sha256: ",
                   PayloadHash(MethodName(r.method))));
  add(absl::StrCat("Authorization: ", r.signature.authorization));
  if (!r.signature.session_token.empty()) {
    add(absl::StrCat("x-amz-security-token: ", r.signature.session_token));
  }
  if (!r.if_match.empty()) add(absl::StrCat("If-Match: \"", r.if_match, "\""));
  if (r.method == S3Request::Method::kGet && r.length > 0) {
    add(absl::StrCat("Range: bytes=", r.offset, "-", r.offset + r.length - 1));
  }
  switch (r.method) {
    case S3Request::Method::kHead:
      curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
      break;
    case S3Request::Method::kPut:
      add("Content-Type: application/octet-stream");
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(r.body.size()));
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, r.body.data());
      break;
    case S3Request::Method::kGet:
      curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
      break;
  }
  w->headers = hs;
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hs);
  return absl::OkStatus();
}

void ReleaseAttempt(AttemptWire* w) {
  if (w->easy != nullptr) curl_easy_cleanup(w->easy);
  w->easy = nullptr;
  curl_slist_free_all(w->headers);
  w->headers = nullptr;
}

bool RetryableCurl(CURLcode c) {
  switch (c) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

}  // namespace stoker
