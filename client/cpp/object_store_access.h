// The trainer's access to an object store, as AWS's conventions give it
// where the trainer runs: what Client::OpenSession sends with a session
// whose dataset is in an object store (OpenSessionRequest.object_store).
// The daemon cannot see the trainer's environment or home folder, so this
// is resolved here, once, for C++, the C ABI and Python alike.
//
// Credentials, first found wins:
//   AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN);
//   the profile's (aws_profile.h: AWS_PROFILE, else "default", in the
//     shared credentials file, then in the config file);
//   none: the access carries no key, and the daemon answers UNAUTHENTICATED
//     saying where to set one.
// Region: AWS_REGION, AWS_DEFAULT_REGION, the profile's `region`, else
// us-east-1. Endpoint: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the
// profile's `endpoint_url`, else https://s3.<region>.amazonaws.com.
//
// Nothing here is logged. A named profile that is in neither file is
// NOT_FOUND naming the profile and the files looked in. Stateless;
// thread-safe.
#ifndef STOKER_CLIENT_CPP_OBJECT_STORE_ACCESS_H_
#define STOKER_CLIENT_CPP_OBJECT_STORE_ACCESS_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "proto/stoker.pb.h"

namespace stoker {

// `getenv` (tests): the environment's lookup; null for unset.
absl::StatusOr<v1::ObjectStoreAccess> ObjectStoreAccessFromEnvironment(
    const std::function<const char*(const char*)>& getenv = nullptr);

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_OBJECT_STORE_ACCESS_H_
