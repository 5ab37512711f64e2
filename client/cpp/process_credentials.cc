#include "client/cpp/process_credentials.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace stoker {

absl::StatusOr<std::unique_ptr<ProcessCredentialSource>> ProcessCredentialSource::Create(
    const std::string& profile, const std::string& command, Clock clock,
    absl::Duration timeout) {
  absl::StatusOr<std::vector<std::string>> argv = SplitCommandLine(command);
  if (argv.ok() && argv->empty()) argv = absl::InvalidArgumentError("it is empty");
  if (!argv.ok()) {
    return Prefixed(absl::StrCat("profile ", profile, " credential_process `", command, "`"),
                    argv.status());
  }
  return std::unique_ptr<ProcessCredentialSource>(new ProcessCredentialSource(
      profile, command, *std::move(argv), std::move(clock), timeout));
}

ProcessCredentialSource::ProcessCredentialSource(std::string profile, std::string command,
                                                 std::vector<std::string> argv, Clock clock,
                                                 absl::Duration timeout)
    : RefreshingSource(std::move(clock)),
      profile_(std::move(profile)),
      command_(std::move(command)),
      argv_(std::move(argv)) {
  limits_.timeout = timeout;
  // The environment as the session opens, on the caller's thread: signer
  // threads never read `environ` while a trainer's thread may set it.
  limits_.environment = EnvironmentNow();
}

std::string ProcessCredentialSource::description() const {
  return absl::StrCat("profile ", profile_, " credential_process");
}

absl::StatusOr<AwsCredentials> ProcessCredentialSource::Fetch() {
  const std::string what = absl::StrCat("credential_process `", command_, "`");
  absl::StatusOr<ChildResult> ran = RunChild(argv_, limits_);
  if (!ran.ok()) {
    return Prefixed(what, ran.status());
  }
  if (!ran->succeeded()) {
    const absl::string_view err = absl::StripAsciiWhitespace(ran->err);
    return absl::UnavailableError(
        absl::StrCat(what, " ", ran->Describe(limits_), err.empty() ? "" : ": ", err));
  }
  absl::StatusOr<AwsCredentials> c = CredentialsFromJson(ran->out, "SessionToken", true);
  if (!c.ok()) return Prefixed(what, c.status());
  return c;
}

}  // namespace stoker
