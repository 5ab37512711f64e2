// Signature Version 4 for S3 requests: one implementation for the daemon
// (which never holds a trainer's secret) and the client library (which
// signs each of its session's requests for the daemon, in the trainer's
// own process).
//
// What is signed: the method, the Host header, the path and query as sent
// (ObjectPath, CanonicalQuery: the bytes on the wire are the bytes
// signed), x-amz-date, x-amz-content-sha256 (the empty body's hash, or
// UNSIGNED-PAYLOAD for a PUT) and, for temporary credentials,
// x-amz-security-token. Range and If-Match are sent unsigned: they choose
// bytes of the object the signature names, never another object.
//
// A SigningRequest travels from daemon to client as five lines of text
// (Encode / Parse); the client's answer, a Signature, as two (the
// Authorization header's value and the session token). Both are parsed as
// hostile: a line a header cannot carry as it is (a CR, an LF, a byte
// outside what AWS's forms hold, a length past theirs) is INVALID_ARGUMENT,
// so no answer adds a header, or a request, to a connection other
// sessions reuse.
//
// SHA-256 and HMAC are Nettle's. Values and pure functions; thread-safe.
#ifndef STOKER_SERVER_OBJSTORE_S3_SIGNING_H_
#define STOKER_SERVER_OBJSTORE_S3_SIGNING_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/objstore/s3_address.h"

namespace stoker {

// What a request's signature covers.
struct SigningRequest {
  std::string method;    // "GET", "HEAD" or "PUT".
  std::string host;      // The Host header's value (HostHeader).
  std::string path;      // As sent: ObjectPath(bucket, key).
  std::string query;     // As sent: CanonicalQuery(params); may be empty.
  std::string amz_date;  // x-amz-date: "20261206T152812Z" (AmzDate).

  // Five lines, as the client is asked.
  std::string Encode() const;
  // INVALID_ARGUMENT for anything but five lines of those forms: a method
  // of the three, a host of [a-z0-9.-:[]] , a path and query of
  // ObjectPath's and CanonicalQuery's bytes, a date of AmzDate's form.
  static absl::StatusOr<SigningRequest> Parse(absl::string_view text);
};

// The headers a signature adds to its request.
struct Signature {
  std::string authorization;  // "AWS4-HMAC-SHA256 Credential=..., ..."
  std::string session_token;  // x-amz-security-token; empty for none.

  std::string Encode() const;  // Two lines.
  // INVALID_ARGUMENT for an answer that is not two lines of those forms
  // (an Authorization value of AWS's form, at most 1 KiB; a token of
  // base64 and URL-safe bytes, at most 4 KiB).
  static absl::StatusOr<Signature> Parse(absl::string_view text);
};

// The key id a signature names ("Credential=<id>/..."); empty for none.
std::string KeyIdOf(const Signature& s);

// Whom a signature is made with (never logged, never in an error).
struct SigningKey {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // Empty for long-term keys.
  std::string region;
};

// `r` signed with `key`.
Signature SignV4(const SigningRequest& r, const SigningKey& key);

// The canonical request's hex signature with `key` (its token aside) for
// `string_to_sign`'s parts: exposed for AWS's published examples.
std::string SignatureOf(absl::string_view canonical_request, absl::string_view amz_date,
                        const SigningKey& key);

// x-amz-content-sha256 for `method`: UNSIGNED-PAYLOAD for PUT, else the
// empty body's SHA-256.
const char* PayloadHash(absl::string_view method);
// "YYYYMMDDTHHMMSSZ" in UTC.
std::string AmzDate(absl::Time t);
// The Host header for `e`: the host (an IPv6 literal bracketed), with
// ":port" unless it is the scheme's default.
std::string HostHeader(const Endpoint& e);
// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(absl::string_view data);

// The byte classes of AWS's key ids, session tokens and regions (header
// lines carry them verbatim).
bool IsKeyIdChar(unsigned char c);
bool IsTokenChar(unsigned char c);
bool IsRegionChar(unsigned char c);

}  // namespace stoker

#endif  // STOKER_SERVER_OBJSTORE_S3_SIGNING_H_
