// One attempt of an S3 request on the wire: a curl easy handle set up for
// it (URL, SigV4, headers, timeouts, the transfer's callbacks), and what
// the reply's header lines and body bytes put into its AttemptFacts. The
// client (s3_client.h) adds the handle to its multi handle, owns it on its
// event thread, and judges the attempt (s3_request.h's JudgeAttempt).
//
// Values and functions; an AttemptWire is used by one thread at a time.
#ifndef STOKER_SERVER_OBJSTORE_S3_ATTEMPT_H_
#define STOKER_SERVER_OBJSTORE_S3_ATTEMPT_H_

#include <curl/curl.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/objstore/s3_request.h"

namespace stoker {

// An error's body (S3's XML) is read to this cap, not the range's.
inline constexpr uint64_t kMaxErrorBody = 64 << 10;

// What every attempt of a client is set up with.
struct AttemptOptions {
  uint64_t max_reply_bytes = 0;
  std::string ca_file;  // Empty: the system's (SystemCaBundle).
  absl::Duration connect_timeout;
  uint64_t low_speed_bytes = 0;  // 0: no low-speed limit.
  absl::Duration low_speed_time;
};

// The attempt in flight: its handle, its header list, what it has read,
// and curl's own words for its failure.
struct AttemptWire {
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  AttemptFacts facts;
  char error[CURL_ERROR_SIZE] = {};
  const Cancellation* cancel = nullptr;  // Aborts the transfer once raised.
};

// Sets `w` up for attempt number `attempt` of `r` (which outlives the
// handle), to end within `time`; the handle's CURLOPT_PRIVATE is `owner`.
// RESOURCE_EXHAUSTED when curl has no handle to give.
absl::Status PrepareAttempt(const S3Request& r, int attempt, absl::Duration time,
                            const AttemptOptions& o, void* owner, AttemptWire* w);
// Frees the handle and its headers (already out of any multi handle).
void ReleaseAttempt(AttemptWire* w);

// A reply's header line into `f`: a status line starts the facts over (a
// 100 Continue's reply is followed by the real one), ETag, version id,
// Content-Range and Content-Length are taken, anything longer than 1 KiB
// is ignored.
void TakeHeaderLine(absl::string_view line, AttemptFacts* f);
// A piece of the body, the reply's status being `http`: false (abort the
// transfer) once the body would pass its cap (over_cap set).
bool TakeBody(absl::string_view data, long http, AttemptFacts* f);

// Whether a transfer that failed this way is worth another attempt.
bool RetryableCurl(CURLcode c);

}  // namespace stoker

#endif  // STOKER_SERVER_OBJSTORE_S3_ATTEMPT_H_
