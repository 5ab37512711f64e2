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
// Instance credentials (EC2), IMDSv2 as the SDKs ask it: PUT
// /latest/api/token (X-aws-ec2-metadata-token-ttl-seconds: 21600), then,
// with that token, GET /latest/meta-data/iam/security-credentials/ (the
// instance role's name) and .../<role> ({"Code": "Success", "AccessKeyId",
// "SecretAccessKey", "Token", "Expiration"}). The service:
// AWS_EC2_METADATA_SERVICE_ENDPOINT, else http://[fd00:ec2::254] where
// AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE is IPv6, else
// http://169.254.169.254; none where AWS_EC2_METADATA_DISABLED is true.
// Timeouts: 1 s to connect, 2 s a request, so that a host without one
// finds out fast.
//
// Errors name the source and what failed (the HTTP status and the start
// of the answer's body), never a token. Thread-safe.
#ifndef STOKER_CLIENT_CPP_HTTP_CREDENTIALS_H_
#define STOKER_CLIENT_CPP_HTTP_CREDENTIALS_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "client/cpp/aws_profile.h"
#include "client/cpp/credential_source.h"
#include "client/cpp/plain_http.h"

namespace stoker {

// What both share: an endpoint, named in their description ("<kind>
// <url>").
class HttpCredentialSource : public RefreshingSource {
 public:
  std::string description() const override { return kind_ + " " + url_text_; }

 protected:
  HttpCredentialSource(std::string kind, std::string url_text, HttpUrl url, Clock clock)
      : RefreshingSource(std::move(clock)),
        kind_(std::move(kind)),
        url_text_(std::move(url_text)),
        url_(std::move(url)) {}
  const HttpUrl& url() const { return url_; }

 private:
  const std::string kind_;
  const std::string url_text_;
  const HttpUrl url_;
};

class ContainerCredentialSource final : public HttpCredentialSource {
 public:
  // Null where neither URI variable is set. Nothing is fetched yet.
  static absl::StatusOr<std::unique_ptr<ContainerCredentialSource>> FromEnvironment(
      const Getenv& getenv, Clock clock = nullptr);

 protected:
  absl::StatusOr<AwsCredentials> Fetch() override;

 private:
  ContainerCredentialSource(std::string url_text, HttpUrl url, std::string token,
                            std::string token_file, Clock clock);

  const std::string token_;       // From the variable (when no file).
  const std::string token_file_;  // Read at each fetch.
};

class InstanceMetadataSource final : public HttpCredentialSource {
 public:
  // Null where AWS_EC2_METADATA_DISABLED is true; FAILED_PRECONDITION for
  // an endpoint that is not an http:// URL. Nothing is fetched yet.
  static absl::StatusOr<std::unique_ptr<InstanceMetadataSource>> FromEnvironment(
      const Getenv& getenv, Clock clock = nullptr);

 protected:
  absl::StatusOr<AwsCredentials> Fetch() override;

 private:
  using HttpCredentialSource::HttpCredentialSource;
};

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_HTTP_CREDENTIALS_H_
