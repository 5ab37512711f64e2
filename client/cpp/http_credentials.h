// Credentials served over plain HTTP on the trainer's host or link
// (plain_http.h), fetched again when due (credential_source.h).
//
// Container credentials (ECS tasks, EKS Pod Identity), as the AWS SDKs
// find them: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (appended to
// http://169.254.170.2), else AWS_CONTAINER_CREDENTIALS_FULL_URI, an
// http:// URL whose host is a loopback address, 169.254.170.2,
// 169.254.170.23 or fd00:ec2::23 (every address a name resolves to is
// checked, at creation and at each fetch; https:// and other hosts are
// FAILED_PRECONDITION). Each fetch sends an Authorization header from the
// file AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, read anew each time (it is
// rotated), else from AWS_CONTAINER_AUTHORIZATION_TOKEN; needs a 200 with
// {"AccessKeyId", "SecretAccessKey", "Token", "Expiration"}. Timeouts:
// 2 s to connect, 5 s in all.
//
// Errors name the source and what failed (the HTTP status and the start
// of the answer's body), never the token. Thread-safe.
#ifndef STOKER_CLIENT_CPP_HTTP_CREDENTIALS_H_
#define STOKER_CLIENT_CPP_HTTP_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/cpp/aws_profile.h"
#include "client/cpp/credential_source.h"
#include "client/cpp/plain_http.h"

namespace stoker {

class ContainerCredentialSource final : public RefreshingSource {
 public:
  // Null where neither URI variable is set. Nothing is fetched yet.
  static absl::StatusOr<std::unique_ptr<ContainerCredentialSource>> FromEnvironment(
      const Getenv& getenv, Clock clock = nullptr);

  std::string description() const override { return "container credentials " + url_text_; }

 protected:
  absl::StatusOr<AwsCredentials> Fetch() override;

 private:
  ContainerCredentialSource(std::string url_text, HttpUrl url, std::string token,
                            std::string token_file, Clock clock);

  const std::string url_text_;
  const HttpUrl url_;
  const std::string token_;       // From the variable (when no file).
  const std::string token_file_;  // Read at each fetch.
};

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_HTTP_CREDENTIALS_H_
