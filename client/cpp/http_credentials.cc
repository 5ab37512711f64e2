#include "client/cpp/http_credentials.h"

#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "util/status_macros.h"

namespace stoker {
namespace {

constexpr size_t kMaxTokenFile = 16 << 10;

// The addresses of `url`'s host, each one a container credentials
// endpoint may have; FAILED_PRECONDITION for any other.
absl::StatusOr<std::vector<SocketAddress>> ContainerAddresses(const HttpUrl& url) {
  STOKER_ASSIGN_OR_RETURN(std::vector<SocketAddress> addresses, ResolveHost(url.host));
  for (const SocketAddress& a : addresses) {
    const std::string text = a.ToString();
    if (!a.IsLoopback() && text != "169.254.170.2" && text != "169.254.170.23" &&
        text != "fd00:ec2::23") {
      return absl::FailedPreconditionError(absl::StrCat(
          "host ", url.host, " (", text,
          ") is not allowed: only a loopback address, 169.254.170.2, 169.254.170.23 or "
          "fd00:ec2::23 may serve container credentials"));
    }
  }
  return addresses;
}

// The start of an answer's body for a message, printable.
std::string Excerpt(absl::string_view body) {
  std::string out(absl::StripAsciiWhitespace(body.substr(0, 200)));
  for (char& c : out) {
    if (!absl::ascii_isprint(static_cast<unsigned char>(c))) c = ' ';
  }
  return out;
}

// The body of `request`'s answer, which must be a 200; errors start with
// `what`.
absl::StatusOr<std::string> FetchOk(const HttpRequest& request, absl::string_view what) {
  absl::StatusOr<HttpResponse> answer = HttpFetch(request);
  if (!answer.ok()) return Prefixed(what, answer.status());
  if (answer->status != 200) {
    return absl::UnavailableError(
        absl::StrCat(what, ": HTTP ", answer->status, ": ", Excerpt(answer->body)));
  }
  return std::move(answer->body);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ContainerCredentialSource>>
ContainerCredentialSource::FromEnvironment(const Getenv& getenv, Clock clock) {
  const std::string relative = EnvValue(getenv, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  const std::string full = EnvValue(getenv, "AWS_CONTAINER_CREDENTIALS_FULL_URI");
  if (relative.empty() && full.empty()) return nullptr;
  const std::string variable = relative.empty() ? "AWS_CONTAINER_CREDENTIALS_FULL_URI"
                                                : "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI";
  const std::string text = relative.empty() ? full
                                            : absl::StrCat("http://169.254.170.2",
                                                           relative[0] == '/' ? "" : "/", relative);
  absl::StatusOr<HttpUrl> url = ParseHttpUrl(text);
  absl::Status allowed = url.status();
  if (allowed.ok()) allowed = ContainerAddresses(*url).status();
  if (!allowed.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(variable, " ", allowed.message()));
  }
  return std::unique_ptr<ContainerCredentialSource>(new ContainerCredentialSource(
      text, *std::move(url), EnvValue(getenv, "AWS_CONTAINER_AUTHORIZATION_TOKEN"),
      EnvValue(getenv, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"), std::move(clock)));
}

ContainerCredentialSource::ContainerCredentialSource(std::string url_text, HttpUrl url,
                                                     std::string token, std::string token_file,
                                                     Clock clock)
    : HttpCredentialSource("container credentials", std::move(url_text), std::move(url),
                           std::move(clock)),
      token_(std::move(token)),
      token_file_(std::move(token_file)) {}

absl::StatusOr<AwsCredentials> ContainerCredentialSource::Fetch() {
  const std::string what = description();
  HttpRequest request;
  request.url = url();
  absl::StatusOr<std::vector<SocketAddress>> addresses = ContainerAddresses(url());
  if (!addresses.ok()) return Prefixed(what, addresses.status());
  request.addresses = *std::move(addresses);
  std::string token = token_;
  if (!token_file_.empty()) {
    std::ifstream in(token_file_, std::ios::binary);
    if (!in) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, ": cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE ", token_file_));
    }
    token.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (token.size() > kMaxTokenFile) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, ": ", token_file_, " is larger than ", kMaxTokenFile, " bytes"));
    }
  }
  absl::StripTrailingAsciiWhitespace(&token);
  if (absl::StrContains(token, "\r") || absl::StrContains(token, "\n")) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": the authorization token holds a line break"));
  }
  if (!token.empty()) request.headers.emplace_back("Authorization", token);
  STOKER_ASSIGN_OR_RETURN(const std::string body, FetchOk(request, what));
  absl::StatusOr<AwsCredentials> c = CredentialsFromJson(body, "Token", false);
  if (!c.ok()) return Prefixed(what, c.status());
  return c;
}

absl::StatusOr<std::unique_ptr<InstanceMetadataSource>> InstanceMetadataSource::FromEnvironment(
    const Getenv& getenv, Clock clock) {
  if (absl::EqualsIgnoreCase(EnvValue(getenv, "AWS_EC2_METADATA_DISABLED"), "true")) {
    return nullptr;
  }
  std::string text = EnvValue(getenv, "AWS_EC2_METADATA_SERVICE_ENDPOINT");
  if (text.empty()) {
    text = absl::EqualsIgnoreCase(EnvValue(getenv, "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"),
                                  "IPv6")
               ? "http://[fd00:ec2::254]"
               : "http://169.254.169.254";
  }
  while (!text.empty() && text.back() == '/') text.pop_back();
  absl::StatusOr<HttpUrl> url = ParseHttpUrl(text);
  if (!url.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("AWS_EC2_METADATA_SERVICE_ENDPOINT ", url.status().message()));
  }
  if (url->target == "/") url->target.clear();  // Paths below are appended.
  return std::unique_ptr<InstanceMetadataSource>(
      new InstanceMetadataSource("instance metadata", text, *std::move(url), std::move(clock)));
}

absl::StatusOr<AwsCredentials> InstanceMetadataSource::Fetch() {
  const std::string what = description();
  auto call = [&](const char* method, const std::string& path,
                  std::pair<std::string, std::string> header) {
    HttpRequest request;
    request.method = method;
    request.url = url();
    request.url.target += path;
    request.headers.push_back(std::move(header));
    request.connect_timeout = absl::Seconds(1);
    request.timeout = absl::Seconds(2);
    return FetchOk(request, absl::StrCat(what, ": ", method, " ", path));
  };
  constexpr char kRoles[] = "/latest/meta-data/iam/security-credentials/";
  STOKER_ASSIGN_OR_RETURN(std::string token,
                          call("PUT", "/latest/api/token",
                               {"X-aws-ec2-metadata-token-ttl-seconds", "21600"}));
  absl::StripAsciiWhitespace(&token);
  STOKER_ASSIGN_OR_RETURN(const std::string roles,
                          call("GET", kRoles, {"X-aws-ec2-metadata-token", token}));
  const std::string role(absl::StripAsciiWhitespace(roles.substr(0, roles.find('\n'))));
  if (role.empty()) {
    return absl::NotFoundError(absl::StrCat(what, ": the instance has no IAM role"));
  }
  STOKER_ASSIGN_OR_RETURN(const std::string body,
                          call("GET", kRoles + role, {"X-aws-ec2-metadata-token", token}));
  absl::StatusOr<AwsCredentials> c = CredentialsFromJson(body, "Token", false);
  if (!c.ok()) return Prefixed(absl::StrCat(what, " (role ", role, ")"), c.status());
  return c;
}

}  // namespace stoker
