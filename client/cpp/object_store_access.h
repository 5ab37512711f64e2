// The trainer's access to an object store, as AWS's conventions give it
// where the trainer runs: what Client::OpenSession sends with a session
// whose dataset is in an object store (OpenSessionRequest.object_store),
// and the credentials the trainer signs that store's requests with. The
// daemon cannot see the trainer's environment or home folder, so this is
// resolved here, for C++, the C ABI and Python alike; the secret never
// leaves the trainer's process.
//
// Credentials: credential_source.h's chain (variables, the profile's keys
// or credential_process, container credentials, ...). The access carries
// the key id they give at first (none: empty, and the daemon answers
// UNAUTHENTICATED saying where to set one), never the secret or the
// session token. An error getting them is this call's error.
// Region: AWS_REGION, AWS_DEFAULT_REGION, the profile's `region`, else
// us-east-1. Endpoint: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the
// profile's `endpoint_url`, else https://s3.<region>.amazonaws.com. The
// profile as aws_profile.h reads it: a named profile that is in neither
// file is NOT_FOUND naming the profile and the files looked in.
//
// Nothing here is logged. Thread-safe.
#ifndef STOKER_CLIENT_CPP_OBJECT_STORE_ACCESS_H_
#define STOKER_CLIENT_CPP_OBJECT_STORE_ACCESS_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "client/cpp/credential_source.h"
#include "proto/stoker.pb.h"

namespace stoker {

struct TrainerObjectStore {
  // Endpoint, region, and access_key_id: the key id the credentials gave
  // at first ("" where there are none).
  v1::ObjectStoreAccess access;
  std::shared_ptr<CredentialSource> credentials;  // Null: none found.
};

// `getenv` (tests): the environment's lookup; null for unset.
absl::StatusOr<TrainerObjectStore> ObjectStoreAccessFromEnvironment(
    const std::function<const char*(const char*)>& getenv = nullptr);

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_OBJECT_STORE_ACCESS_H_
