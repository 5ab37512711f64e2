// Where an S3 request goes, and the operator's say over it.
//
// An `Endpoint` is a parsed `http[s]://host[:port]` (no path, no user
// part); `EndpointAllowList` is the daemon's `--object-store-endpoints`:
// the daemon sends requests only to endpoints listed there, so no trainer
// can make it reach a metadata service, a loopback port or an intranet
// host. `S3Url` parses a trainer's `s3://bucket/key` names, checking the
// bucket against S3's naming rules and the key against its length limit.
//
// `ObjectPath` and `CanonicalQuery` build a request's path and query the
// way Signature Version 4 canonicalises them (each name and value
// URI-encoded with only A-Z a-z 0-9 - _ . ~ kept, then sorted), so the
// bytes on the wire are the bytes signed, whatever the signer does with
// them.
//
// Values only; thread-safe.
#ifndef STOKER_SERVER_OBJSTORE_S3_ADDRESS_H_
#define STOKER_SERVER_OBJSTORE_S3_ADDRESS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stoker {

struct Endpoint {
  bool tls = true;
  std::string host;   // Lower-cased; an IPv6 literal without brackets.
  uint16_t port = 0;  // Always set: 443 or 80 by default.

  // Parses "https://host[:port]" or "http://host[:port]" (one trailing
  // slash allowed); INVALID_ARGUMENT names what is wrong.
  static absl::StatusOr<Endpoint> Parse(absl::string_view url);
  // "https://host:port", the form the allow-list compares and errors show.
  std::string ToString() const;
  bool operator==(const Endpoint& o) const {
    return tls == o.tls && host == o.host && port == o.port;
  }
};

class EndpointAllowList {
 public:
  EndpointAllowList() = default;
  // A comma-separated list (the flag's value) of endpoint URLs and `aws`:
  // AWS's own S3 endpoints, https on 443 only (s3.amazonaws.com and
  // s3[-fips][.dualstack].<region>.amazonaws.com[.cn]). Empty allows none.
  static absl::StatusOr<EndpointAllowList> Parse(absl::string_view list);
  // Admins' sessions may reach whatever endpoint their client resolved:
  // for a daemon that serves one user (the embedded one, whose one admin
  // is that user), whose requests then go only where that user's own
  // configuration sends them.
  void AllowAdmins() { admins_ = true; }
  // OK for a listed endpoint, one of AWS's where `aws` is listed, or any
  // for an `admin` session's where admins are allowed; else
  // PERMISSION_DENIED naming the endpoint and the flag.
  absl::Status Check(const Endpoint& e, bool admin) const;
  const std::vector<Endpoint>& endpoints() const { return endpoints_; }
  // Whether it allows no endpoint to anyone.
  bool empty() const { return endpoints_.empty() && !aws_ && !admins_; }

 private:
  std::vector<Endpoint> endpoints_;
  bool aws_ = false;
  bool admins_ = false;
};

struct S3Url {
  std::string bucket;
  std::string key;  // May be empty (the bucket) or end in '/' (a prefix).

  // Parses "s3://bucket[/key]": INVALID_ARGUMENT for a bucket outside S3's
  // naming rules (3-63 of a-z 0-9 . -, starting and ending alphanumeric)
  // or a key over 1024 bytes.
  static absl::StatusOr<S3Url> Parse(absl::string_view url);
  std::string ToString() const { return "s3://" + bucket + "/" + key; }
};

// Whether `s` names an object store ("s3://...").
bool IsS3Url(absl::string_view s);

// SigV4's URI encoding: every byte but A-Z a-z 0-9 - _ . ~ as %XX (upper
// case hex); '/' kept when `keep_slash` (object paths).
std::string UriEncode(absl::string_view s, bool keep_slash);

// "/bucket/key" with the key URI-encoded, slashes kept (path-style
// addressing, which every S3 implementation serves); "/bucket" for the
// bucket itself (an empty key).
std::string ObjectPath(absl::string_view bucket, absl::string_view key);

// The query string of `params` as SigV4 canonicalises it: names and values
// encoded, sorted by name then value, joined with '&' ("" for none).
std::string CanonicalQuery(std::vector<std::pair<std::string, std::string>> params);

}  // namespace stoker

#endif  // STOKER_SERVER_OBJSTORE_S3_ADDRESS_H_
