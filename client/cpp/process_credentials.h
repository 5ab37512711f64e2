// Credentials from a profile's credential_process, as the AWS SDKs run
// it: the command line is split with shell quoting and run without a
// shell (child_process.h), with the trainer's environment, stdin from
// /dev/null, a timeout (60 s unless told) after which its process group
// is killed, stdout capped at 1 MiB and the first 4 KiB of its stderr
// kept for the error. It must exit 0 and print {"Version": 1,
// "AccessKeyId", "SecretAccessKey", "SessionToken" (optional),
// "Expiration" (optional: never)}; it is run again when they are due for
// a refresh (credential_source.h).
//
// Errors name the command and what failed: "credential_process `cmd`
// exited 1: <its stderr>", "... ran past 60s and was killed", "...: its
// output is not a JSON object". Thread-safe.
#ifndef STOKER_CLIENT_CPP_PROCESS_CREDENTIALS_H_
#define STOKER_CLIENT_CPP_PROCESS_CREDENTIALS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cpp/child_process.h"
#include "client/cpp/credential_source.h"

namespace stoker {

class ProcessCredentialSource final : public RefreshingSource {
 public:
  // `command`: the profile's credential_process line; INVALID_ARGUMENT
  // where its quoting is broken or it is empty. Nothing is run yet.
  static absl::StatusOr<std::unique_ptr<ProcessCredentialSource>> Create(
      const std::string& profile, const std::string& command, Clock clock = nullptr,
      absl::Duration timeout = absl::Seconds(60));

  std::string description() const override;

 protected:
  absl::StatusOr<AwsCredentials> Fetch() override;

 private:
  ProcessCredentialSource(std::string profile, std::string command,
                          std::vector<std::string> argv, Clock clock, absl::Duration timeout);

  const std::string profile_;
  const std::string command_;
  const std::vector<std::string> argv_;
  ChildLimits limits_;
};

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_PROCESS_CREDENTIALS_H_
