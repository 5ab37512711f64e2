// An S3 API client (AWS S3, MinIO, Ceph RGW, ...) on libcurl's multi
// interface: one event thread keeps many requests in flight for every
// caller, each signed with the caller's own credentials (Signature
// Version 4, curl's signer, the payload hash set explicitly).
//
// Every request:
// - goes only to an endpoint of the allow-list given at creation (the
//   operator's `--object-store-endpoints`); redirects are never followed,
//   proxies from the environment never used, TLS verified against the
//   system's CA bundle;
// - has a deadline for each attempt (connect and total), and is retried
//   on 5xx, 429, timeouts and connection failures with jittered
//   exponential backoff, up to `max_attempts`;
// - has a deadline of its own, `deadline` from Start, which its time
//   queued, its attempts and their backoff all count against: past it,
//   it ends DEADLINE_EXCEEDED (an attempt in flight is cut at it, no
//   attempt starts or waits past it), so a slow store holds its caller
//   at most that long;
// - ends CANCELLED as soon as its cancellation (S3Request::cancel) is
//   raised: one queued or waiting to retry is dropped, one in flight has
//   its transfer aborted (curl's progress callback, and the event thread
//   woken by the cancellation), so a closed session's reads free their
//   callers and their connections at once;
// - is abandoned as too slow (a timeout, then retried within the
//   deadline) when it transfers less than `low_speed_bytes` a second for
//   `low_speed_time` (0 bytes: no such limit), waiting for its first
//   byte included;
// - has its reply capped before it is stored (a GET at its range's size,
//   anything else at `max_reply_bytes`).
// The number in flight to each endpoint adapts (in_flight_limit.h): from
// `initial_in_flight` it doubles each round trip while requests wait,
// then keeps only a few queued at the store (from each GET's time to first
// byte), drops to the floor for a moment every 10 s to measure the path's
// own latency, and halves on a throttle (503 SlowDown, 429) or a timeout;
// all endpoints together never pass `max_in_flight`. Waiting requests are
// started owner by owner in turn (S3Request::owner, a uid), so one user's
// many requests never hold another's back.
//
// Errors name the object as s3://bucket/key and the endpoint, never the
// credentials: PERMISSION_DENIED (403, with S3's code), NOT_FOUND (404),
// OUT_OF_RANGE (416), FAILED_PRECONDITION (412: the object changed),
// DEADLINE_EXCEEDED or UNAVAILABLE once the retries are spent,
// DEADLINE_EXCEEDED past the request's deadline (saying it was too slow),
// CANCELLED (its cancellation raised), RESOURCE_EXHAUSTED (a reply over
// its cap), DATA_LOSS (a reply that contradicts the request).
//
// Every caller-supplied byte that reaches a header line (key id, secret,
// session token, region, ETag) is checked first: a CR or LF there would
// add headers, or a request, to a connection other sessions reuse.
//
// Thread-safe. Callbacks run on the client's event thread and must not
// block, nor destroy the client; the blocking forms (Head, Get, List) are
// FAILED_PRECONDITION there. Destruction (after every Start has returned)
// cancels what is still in flight (CANCELLED).
#ifndef STOKER_SERVER_OBJSTORE_S3_CLIENT_H_
#define STOKER_SERVER_OBJSTORE_S3_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/objstore/object_store.h"
#include "server/objstore/s3_address.h"
#include "server/objstore/s3_request.h"
#include "server/objstore/s3_xml.h"

namespace stoker {

class S3Client : public ObjectStore {
 public:
  struct Options {
    EndpointAllowList endpoints;
    int min_in_flight = 4;
    int initial_in_flight = 16;  // Where it starts (within min..max).
    int max_in_flight = 64;
    absl::Duration connect_timeout = absl::Seconds(5);
    absl::Duration request_timeout = absl::Seconds(60);  // Each attempt.
    absl::Duration deadline = absl::Minutes(2);  // The whole request.
    uint64_t low_speed_bytes = 1024;             // A second, for...
    absl::Duration low_speed_time = absl::Seconds(10);  // ...at least 1 s.
    int max_attempts = 5;
    absl::Duration backoff_base = absl::Milliseconds(50);
    absl::Duration backoff_cap = absl::Seconds(2);
    uint64_t max_reply_bytes = 64 << 20;
    // A CA bundle other than the system's (tests); empty: the system's.
    std::string ca_file;
  };

  // Counters since creation (also exported as metrics by their owner).
  struct Stats {
    uint64_t requests = 0;     // Attempts sent.
    uint64_t retries = 0;      // Of those, repeats.
    uint64_t failures = 0;     // Requests that ended in an error.
    uint64_t bytes = 0;        // Reply bytes received.
    uint64_t throttles = 0;    // 503/429 replies and timeouts.
    int in_flight_limit = 0;   // Now: all endpoints', at most max_in_flight.
  };

  static absl::StatusOr<std::unique_ptr<S3Client>> Create(Options options);
  ~S3Client() override;
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  // Starts `r`; `done` runs once, on the event thread. A request to an
  // endpoint off the allow-list, or without credentials, fails at once
  // (done runs before Start returns).
  void Start(S3Request r, std::function<void(S3Reply)> done);
  // Start, waiting for the reply; CANCELLED as soon as `stop` (may be
  // empty; polled every 50 ms) says so, the request left to end unseen.
  S3Reply Run(S3Request r, const std::function<bool()>& stop = nullptr);

  // The blocking forms below are for `owner` (S3Request::owner).
  // The object's size and version (HEAD), at version `if_match` when set.
  // `cancel` (may be null): S3Request::cancel.
  absl::StatusOr<ObjectVersion> Head(const Endpoint& e, const S3Url& object,
                                     std::shared_ptr<const S3Credentials> c,
                                     const std::string& if_match = "", int64_t owner = -1,
                                     std::shared_ptr<const Cancellation> cancel = nullptr);
  // Replaces *out with bytes [offset, offset + length) of the object
  // (length 0: all of it), at version `if_match` when set; *seen (may be
  // null) is the version read. `stop`: as Run's; `cancel` (may be null):
  // S3Request::cancel.
  absl::Status Get(const Endpoint& e, const S3Url& object, uint64_t offset, uint64_t length,
                   const std::string& if_match, std::shared_ptr<const S3Credentials> c,
                   std::string* out, ObjectVersion* seen = nullptr, int64_t owner = -1,
                   const std::function<bool()>& stop = nullptr,
                   std::shared_ptr<const Cancellation> cancel = nullptr);
  // One ListObjectsV2 page of `prefix` (and its CommonPrefixes when
  // `delimiter` is set), from `token` ("" for the first), of at most
  // `max_keys` entries (0: the server's default, 1000 on S3). `stop`: as
  // Run's; `cancel` (may be null): S3Request::cancel.
  absl::StatusOr<ListPage> List(const Endpoint& e, const std::string& bucket,
                                const std::string& prefix, const std::string& delimiter,
                                const std::string& token,
                                std::shared_ptr<const S3Credentials> c, int max_keys = 0,
                                int64_t owner = -1,
                                const std::function<bool()>& stop = nullptr,
                                std::shared_ptr<const Cancellation> cancel = nullptr);

  // The ObjectStore: the blocking forms above, as the access's owner, with
  // its credentials, at its endpoint, cancelled with it.
  absl::StatusOr<ObjectVersion> Head(const ObjectStoreAccess& a, const S3Url& object,
                                     const std::string& if_match) override {
    return Head(a.endpoint, object, a.credentials, if_match, a.owner, a.cancel);
  }
  absl::Status Get(const ObjectStoreAccess& a, const S3Url& object, uint64_t offset,
                   uint64_t length, const std::string& if_match, std::string* out,
                   ObjectVersion* seen, const std::function<bool()>& stop) override {
    return Get(a.endpoint, object, offset, length, if_match, a.credentials, out, seen, a.owner,
               stop, a.cancel);
  }
  absl::StatusOr<ListPage> List(const ObjectStoreAccess& a, const std::string& bucket,
                                const std::string& prefix, const std::string& delimiter,
                                const std::string& token, int max_keys,
                                const std::function<bool()>& stop) override {
    return List(a.endpoint, bucket, prefix, delimiter, token, a.credentials, max_keys, a.owner,
                stop, a.cancel);
  }

  Stats stats() const;

 private:
  class Loop;  // The curl multi handle and its thread (s3_client.cc).
  explicit S3Client(std::unique_ptr<Loop> loop);
  std::unique_ptr<Loop> loop_;
};

}  // namespace stoker

#endif  // STOKER_SERVER_OBJSTORE_S3_CLIENT_H_
