#include "client/cpp/http_credentials.h"

#include <fstream>
#include <iterator>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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
    : RefreshingSource(std::move(clock)),
      url_text_(std::move(url_text)),
      url_(std::move(url)),
      token_(std::move(token)),
      token_file_(std::move(token_file)) {}

absl::StatusOr<AwsCredentials> ContainerCredentialSource::Fetch() {
  const std::string what = description();
  HttpRequest request;
  request.url = url_;
  absl::StatusOr<std::vector<SocketAddress>> addresses = ContainerAddresses(url_);
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
  absl::StatusOr<HttpResponse> answer = HttpFetch(request);
  if (!answer.ok()) return Prefixed(what, answer.status());
  if (answer->status != 200) {
    return absl::UnavailableError(
        absl::StrCat(what, ": HTTP ", answer->status, ": ", Excerpt(answer->body)));
  }
  absl::StatusOr<AwsCredentials> c = CredentialsFromJson(answer->body, "Token", false);
  if (!c.ok()) return Prefixed(what, c.status());
  return c;
}

}  // namespace stoker
