// What a session's client signs for the daemon, and nothing else: the
// trainer's secret stays in the trainer's process, and a daemon (the node's,
// or one that only claims to be) gets a signature for each request of the
// session's own dataset, each good for 15 minutes, never a key.
//
// A request (server/objstore/s3_signing.h's wire form) is signed only when
//   - its method is GET or HEAD;
//   - its Host is the endpoint the trainer resolved;
//   - its date is within 5 minutes of this machine's clock (no signature
//     made now for later);
//   - it names an object of the dataset: the source's `url` itself, or a
//     key below it (a prefix URL's keys; a URL that is no prefix: keys
//     below it as a folder; a URL ending in a {a..b} pattern: keys in the
//     pattern's folder), or the source's manifest object; with no "." or
//     ".." path segment; and no query;
//   - or it lists the dataset's bucket (ListObjectsV2: list-type=2, a
//     prefix below the dataset's, delimiter, continuation-token, max-keys,
//     nothing else).
// A listing's parameters each once, in CanonicalQuery's form. Anything
// else is PERMISSION_DENIED saying what was asked and what the session may
// reach; the daemon hands that to its caller.
//
// Credentials that cannot be had are the source's status code with a
// message that says only so: their words (a credential_process's command
// line and stderr may hold secrets) go to this process's stderr, once
// each, never to the daemon.
//
// Credentials come from `credentials` at each signature (the source
// refreshes them). Thread-safe: Sign runs on the signer's own threads.
#ifndef STOKER_CLIENT_CPP_SESSION_SIGNER_H_
#define STOKER_CLIENT_CPP_SESSION_SIGNER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cpp/credential_source.h"
#include "proto/stoker.pb.h"
#include "server/objstore/s3_signing.h"
#include "shm/open_channel.h"

namespace stoker {

class SessionSigner {
 public:
  // The credentials to sign with now (key id, secret, token; the region
  // is the signer's).
  using Credentials = std::function<absl::StatusOr<SigningKey>()>;

  // For `source` at `endpoint` ("https://host[:port]") in `region`.
  // INVALID_ARGUMENT for a URL, manifest URL or endpoint that does not
  // parse.
  static absl::StatusOr<std::unique_ptr<SessionSigner>> Create(
      const v1::S3Source& source, const std::string& endpoint, const std::string& region,
      Credentials credentials, std::function<absl::Time()> now = nullptr);

  // The signature (Signature::Encode) of `request` (SigningRequest::Encode).
  absl::StatusOr<std::string> Sign(const std::string& request) const;

 private:
  struct Reach {  // One object, or the keys below a prefix, of a bucket.
    std::string bucket, key;
    bool prefix = false;
  };
  SessionSigner() = default;
  // Whether `key` of `bucket` is within reach (as `listing`: a prefix).
  bool Reaches(const std::string& bucket, const std::string& key, bool listing) const;
  std::string Described() const;

  std::string host_, region_;
  std::vector<Reach> reach_;
  Credentials credentials_;
  std::function<absl::Time()> now_;
};

// Serves a SessionSigner of `source` for `access` (its endpoint and
// region) on a signer channel of its own (shm/open_channel.h's
// ServeSigner) and hands that to the daemon at `ring_socket`
// (shm::HandOverSigner), setting access->signer_token. Each signature
// takes `credentials` as they are then (credential_source.h refreshes
// them). The server signs for as long as it lives.
absl::StatusOr<std::unique_ptr<shm::OpenServer>> ServeSessionSigner(
    const std::string& ring_socket, const v1::S3Source& source, v1::ObjectStoreAccess* access,
    std::shared_ptr<CredentialSource> credentials);

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_SESSION_SIGNER_H_
