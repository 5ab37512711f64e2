// One S3 request and its reply, as values: what a request carries, the
// checks it passes before anything is sent (CheckRequest), and what one
// attempt's answer means (JudgeAttempt): the reply's status, whether to try
// again, and whether the store asked to slow down. No I/O here: the client
// (s3_client.h) fills an AttemptFacts from the wire and acts on the
// verdict, and tests judge any answer without a server.
//
// Values and pure functions; thread-safe.
#ifndef STOKER_SERVER_OBJSTORE_S3_REQUEST_H_
#define STOKER_SERVER_OBJSTORE_S3_REQUEST_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "server/objstore/s3_address.h"
#include "server/objstore/s3_signing.h"
#include "util/cancellation.h"

namespace stoker {

// A caller's credentials. Never logged, counted or put in a key or an
// error: it has no printing form, so StrCat or a stream refuses it.
// Destroyed, it overwrites its secret and token (WipeSecret) before their
// memory returns to the heap, so a closed session's secret does not linger
// in the daemon's memory through this copy.
struct S3Credentials {
  S3Credentials() = default;
  S3Credentials(const S3Credentials&) = default;
  S3Credentials& operator=(const S3Credentials&) = delete;  // Would free unwiped.
  ~S3Credentials();

  std::string access_key_id;
  std::string secret_access_key;  // Empty where `remote` signs.
  std::string session_token;  // Empty unless temporary credentials.
  std::string region = "us-east-1";
  // Signs for a caller whose secret the daemon never holds: the caller's
  // own client, asked for each request (its answer already parsed as
  // hostile, s3_signing.h). Null: signed here, with the secret.
  std::function<absl::StatusOr<Signature>(const SigningRequest&)> remote;
  // Every signature `remote` makes must be by `access_key_id` (a proof
  // for what is kept under that key id): ABORTED otherwise.
  bool signed_as_named = false;
};

// Overwrites all of `s`'s buffer (its capacity, not only its size) with
// zeros, in a way the compiler keeps, and empties it.
void WipeSecret(std::string* s);

// What a session reaches objects with: the endpoint its trainer named
// (checked against the allow-list at each request) and the trainer's own
// credentials.
struct ObjectStoreAccess {
  Endpoint endpoint;
  std::shared_ptr<const S3Credentials> credentials;
  int64_t owner = -1;  // Whom its requests are for (S3Request::owner).
  // Raised as its session closes (S3Request::cancel); null: never.
  std::shared_ptr<const Cancellation> cancel;
};

// What a HEAD or GET saw of an object.
struct ObjectVersion {
  uint64_t size = 0;       // The whole object's (Content-Length, Content-Range).
  std::string etag;        // Quotes removed.
  std::string version_id;  // x-amz-version-id; empty when unversioned.
};

struct S3Request {
  enum class Method { kGet, kHead, kPut };
  Method method = Method::kGet;
  Endpoint endpoint;
  std::string bucket;
  std::string key;
  std::vector<std::pair<std::string, std::string>> query;
  // A ranged GET of [offset, offset + length); length 0: the whole object.
  uint64_t offset = 0, length = 0;
  // Sent as If-Match when set: a changed object is FAILED_PRECONDITION.
  std::string if_match;
  std::string body;  // PUT only.
  std::shared_ptr<const S3Credentials> credentials;
  // Whom it is for (a uid; -1: an admin session's or the daemon's own): owners
  // take turns.
  int64_t owner = -1;
  // Raised when whom it is for no longer wants it (its session closed):
  // the request ends CANCELLED at once, queued or in flight, and is not
  // tried again. Null: never.
  std::shared_ptr<const Cancellation> cancel;
  // Set by SignRequest, once: every attempt sends these headers (a
  // signature holds for 15 minutes; a request's deadline is shorter).
  std::string host, amz_date;
  Signature signature;
};

// "GET", "HEAD" or "PUT".
const char* MethodName(S3Request::Method m);

// Signs `r` as of `now` with its credentials: here with their secret, or by
// asking their `remote` signer. The signer's error, saying so, when the
// caller's client does not sign (UNAVAILABLE: it is gone or did not answer
// in time; PERMISSION_DENIED: it refused, its words given).
absl::Status SignRequest(S3Request* r, absl::Time now);

struct S3Reply {
  absl::Status status;
  long http = 0;  // The last attempt's HTTP status (0: none).
  std::string body;
  ObjectVersion version;
  int attempts = 0;
  // The store said the request's session token has expired (its
  // credentials were refreshed since it was signed, or are being); for a
  // HEAD its caller's client signed, any 400 or 403 (no body names why).
  bool expired_token = false;
};

// Whether `r` may be sent: UNAUTHENTICATED without credentials (saying
// where the trainer sets them); INVALID_ARGUMENT for a caller byte that a
// header line cannot carry as it is (key id, secret, session token,
// region, ETag: curl writes header entries, and the key id and region
// inside the Authorization line, verbatim, so a CR or LF would add headers
// or a request to a connection other sessions reuse), or a range whose end
// overflows.
absl::Status CheckRequest(const S3Request& r);

// What one attempt saw.
struct AttemptFacts {
  enum class Transport { kDone, kTimedOut, kRetryable, kFailed };
  Transport transport = Transport::kDone;
  std::string transport_error;  // The transport's words when not kDone.
  long http = 0;                // 0: no status line came.
  bool over_cap = false;        // The body passed `cap` and was cut.
  uint64_t cap = 0;
  std::string body;
  std::string etag, version_id, content_range;  // Headers, as sent.
  bool has_length = false;
  uint64_t content_length = 0;
  int attempt = 1;  // 1 for the first.
};

struct AttemptVerdict {
  S3Reply reply;
  bool retry = false;      // Worth another attempt (the budget aside).
  bool throttled = false;  // 503, 429 or a timeout: fewer in flight.
};

// The meaning of `facts` for `r`. Errors name `s3://bucket/key` and the
// endpoint, with S3's error code, never its message: PERMISSION_DENIED for
// refused credentials (403, or 400 for an unknown or expired token),
// NOT_FOUND, OUT_OF_RANGE, FAILED_PRECONDITION (If-Match failed),
// INVALID_ARGUMENT (other 4xx: region or endpoint), UNAVAILABLE (5xx, 429,
// S3's RequestTimeout, connection failures) or DEADLINE_EXCEEDED with the
// attempts made, RESOURCE_EXHAUSTED (a successful reply over its cap),
// DATA_LOSS (a reply that contradicts the request: its range, its length).
AttemptVerdict JudgeAttempt(const S3Request& r, AttemptFacts facts);

// "s3://bucket/key".
std::string Named(const S3Request& r);

}  // namespace stoker

#endif  // STOKER_SERVER_OBJSTORE_S3_REQUEST_H_
