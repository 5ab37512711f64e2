// The trainer's AWS credentials, resolved as the AWS SDKs and CLI resolve
// them and kept fresh for runs that last days while the credentials last
// from minutes to hours. The secret stays in the trainer's process: the
// client signs the daemon's object store requests with what Get() gives.
//
// CredentialsFromEnvironment's chain, first that applies wins:
//   1. AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN):
//      "environment", never refreshed.
//   2. The profile (see aws_profile.h) when it needs AWS STS or SSO over
//      HTTPS, which this client does not speak (AWS_WEB_IDENTITY_TOKEN_FILE
//      + AWS_ROLE_ARN, or the profile's web_identity_token_file, role_arn,
//      sso_session or sso_start_url) and has no credential_process:
//      FAILED_PRECONDITION saying to set `credential_process = aws
//      configure export-credentials --profile NAME --format process` there.
//   3. The profile's aws_access_key_id + aws_secret_access_key
//      (+ aws_session_token) in the credentials file: "profile NAME
//      (credentials file)".
//   4. The profile's credential_process (process_credentials.h): "profile
//      NAME credential_process".
//   5. The same keys in the config file: "profile NAME (config file)".
//   6. AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, then
//      AWS_CONTAINER_CREDENTIALS_FULL_URI (http_credentials.h): "container
//      credentials URL".
//   7. The instance metadata service, IMDSv2 (http_credentials.h), unless
//      AWS_EC2_METADATA_DISABLED=true, when it answers with a role's
//      credentials at once: "instance metadata URL".
//   None: a null source, not an error (the session then has no
//   credentials). An AWS_PROFILE in neither file is NOT_FOUND.
//
// Every source caches what it fetched and refreshes it, by one thread,
// when less than min(5 min, half the time they had when fetched) is left
// before they expire; other threads go on with the cached credentials
// meanwhile and wait for the refresh only once those have expired. A
// failed refresh keeps the cached credentials while they last and is
// retried 10 s later (at once when they are gone). Errors name the source
// and what failed, never a secret. Thread-safe.
#ifndef STOKER_CLIENT_CPP_CREDENTIAL_SOURCE_H_
#define STOKER_CLIENT_CPP_CREDENTIAL_SOURCE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/cpp/aws_profile.h"

namespace stoker {

struct AwsCredentials {
  std::string access_key_id, secret_access_key, session_token;  // No token: long-term keys.
  absl::Time expiration = absl::InfiniteFuture();
};

class CredentialSource {
 public:
  virtual ~CredentialSource() = default;
  // The credentials to sign with now (see above for when they refresh).
  virtual absl::StatusOr<AwsCredentials> Get() = 0;
  // Where they come from, for messages: "environment", "profile train
  // (credentials file)", "profile train credential_process", "container
  // credentials http://...".
  virtual std::string description() const = 0;
};

// What refresh decisions read as the time (tests inject one); null:
// absl::Now.
using Clock = std::function<absl::Time()>;

// The cache and refresh every source shares: a source says how to fetch.
class RefreshingSource : public CredentialSource {
 public:
  absl::StatusOr<AwsCredentials> Get() final;

  // How long before they expire credentials fetched with `lifetime` left
  // are refreshed: min(5 min, lifetime / 2).
  static absl::Duration RefreshLead(absl::Duration lifetime);
  static constexpr absl::Duration kRetryAfterFailure = absl::Seconds(10);

 protected:
  explicit RefreshingSource(Clock clock);
  // New credentials from the source; an error names the source. Called by
  // one thread at a time, never under a lock of this class.
  virtual absl::StatusOr<AwsCredentials> Fetch() = 0;

 private:
  absl::Time Now() const;

  const Clock clock_;
  absl::Mutex mu_;
  bool have_ ABSL_GUARDED_BY(mu_) = false;
  AwsCredentials current_ ABSL_GUARDED_BY(mu_);
  absl::Time refresh_at_ ABSL_GUARDED_BY(mu_);
  absl::Time retry_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool fetching_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t fetches_ ABSL_GUARDED_BY(mu_) = 0;  // Ended, ok or not.
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
};

// Credentials that do not change (their end, if any, is not known).
class StaticCredentialSource final : public RefreshingSource {
 public:
  StaticCredentialSource(AwsCredentials credentials, std::string description)
      : RefreshingSource(nullptr),
        credentials_(std::move(credentials)),
        description_(std::move(description)) {}
  std::string description() const override { return description_; }

 protected:
  absl::StatusOr<AwsCredentials> Fetch() override { return credentials_; }

 private:
  const AwsCredentials credentials_;
  const std::string description_;
};

// The credentials in `json`, an object as the AWS credential providers
// answer: AccessKeyId and SecretAccessKey (both required), the session
// token as member `token_member` ("SessionToken" for credential_process,
// "Token" for container and instance credentials), and Expiration (ISO
// 8601: 2026-12-06T15:00:00Z, also with fractional seconds or an offset;
// none: never). `Version` must be 1 where `version_required` or present;
// `Code`, where present, "Success". Errors (FAILED_PRECONDITION) say what
// is wrong, never quoting a secret.
absl::StatusOr<AwsCredentials> CredentialsFromJson(absl::string_view json,
                                                   absl::string_view token_member,
                                                   bool version_required);

// `s` with its message prefixed: "<what>: <message>".
absl::Status Prefixed(absl::string_view what, const absl::Status& s);

// An ISO 8601 time as AWS writes them; INVALID_ARGUMENT otherwise.
absl::StatusOr<absl::Time> ParseIso8601(absl::string_view text);

struct CredentialOptions {
  Clock clock;  // Null: absl::Now.
  absl::Duration process_timeout = absl::Seconds(60);
};

absl::StatusOr<std::shared_ptr<CredentialSource>> CredentialsFromEnvironment(
    const std::function<const char*(const char*)>& getenv = nullptr,
    const CredentialOptions& options = {});
// The same with the profile already read (LoadAwsProfile with `getenv`).
absl::StatusOr<std::shared_ptr<CredentialSource>> CredentialsFromProfile(
    const AwsProfile& profile, const std::function<const char*(const char*)>& getenv = nullptr,
    const CredentialOptions& options = {});

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_CREDENTIAL_SOURCE_H_
