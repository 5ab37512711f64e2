#include "client/cpp/process_credentials.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>

#include "client/cpp/aws_testing.h"

namespace stoker {
namespace {

class ProcessCredentialsTest : public AwsTest {
 protected:
  // An executable /bin/sh script of `body` at `name` below the home.
  std::string Script(const std::string& name, const std::string& body) {
    return Write(name, "#!/bin/sh\n" + body, 0755);
  }
  // The source of kCounting (below) at ~/bin/creds, on `clock_`; KEY1
  // fetched at start_.
  std::unique_ptr<ProcessCredentialSource> Counting();

  absl::StatusOr<AwsCredentials> Run(const std::string& command,
                                     absl::Duration timeout = absl::Seconds(60)) {
    absl::StatusOr<std::unique_ptr<ProcessCredentialSource>> s =
        ProcessCredentialSource::Create("train", command, nullptr, timeout);
    if (!s.ok()) return s.status();
    return (*s)->Get();
  }
  // How many times kCounting ran.
  std::string Count() {
    std::string count;
    std::ifstream(home_ + "/bin/count") >> count;
    return count;
  }

  FakeClock clock_;
  const absl::Time start_ = clock_.Now();
};

TEST_F(ProcessCredentialsTest, RunsTheProfilesCommandWithoutAShell) {
  const std::string script = Script(
      "my tools/print creds",
      "printf '{\"Version\": 1, \"AccessKeyId\": \"%s\", \"SecretAccessKey\": \"s\", "
      "\"SessionToken\": \"%s\", \"Expiration\": \"2126-12-06T15:00:00.5+00:00\"}' "
      "\"$1\" \"$2\"\n");
  Write("config", "[default]\ncredential_process = \"" + script +
                      "\" 'key id' $HOME;ignored\n");
  absl::StatusOr<std::shared_ptr<CredentialSource>> source = CredentialsFromEnvironment(getenv());
  ASSERT_TRUE(source.ok() && *source != nullptr) << source.status();
  EXPECT_EQ((*source)->description(), "profile default credential_process");
  absl::StatusOr<AwsCredentials> c = (*source)->Get();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "key id");
  EXPECT_EQ(c->secret_access_key, "s");
  EXPECT_EQ(c->session_token, "$HOME;ignored");  // No shell expands it.
  EXPECT_EQ(c->expiration, absl::FromCivil(absl::CivilSecond(2126, 12, 6, 15, 0, 0),
                                           absl::UTCTimeZone()) +
                               absl::Milliseconds(500));
}

TEST_F(ProcessCredentialsTest, FailuresNameTheCommandAndWhatHappened) {
  const std::string fails =
      Script("fails", "echo 'token expired: run aws sso login' >&2; exit 1\n");
  absl::Status s = Run(fails + " --x").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "credential_process `" + fails + " --x` exited 1: "
                         "token expired: run aws sso login");
  const std::string chatty =
      Script("chatty", "head -c 100000 /dev/zero | tr '\\0' e >&2; exit 2\n");
  s = Run(chatty).status();
  const std::string start = "credential_process `" + chatty + "` exited 2: eeee";
  EXPECT_TRUE(Contains(s.message(), start));
  EXPECT_EQ(s.message().size(), start.size() - 4 + 4096);  // Its stderr, capped.

  s = Run(Script("slow", "echo starting >&2; exec sleep 60\n"), absl::Milliseconds(300)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(Contains(s.message(), "ran past 300ms and was killed: starting"));

  s = Run(Script("huge", "exec yes\n")).status();
  EXPECT_TRUE(Contains(s.message(), "wrote more than 1048576 bytes to stdout and was killed"));

  s = Run(Script("broken", "echo '{\"Version\": 1, \"AccessKeyId\": \"A\", "
                           "\"SecretAccessKey\": \"TOPSECRET'\n")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(s.message(), "is not a JSON object"));
  EXPECT_FALSE(Contains(s.message(), "TOPSECRET"));

  s = Run(Script("old", "echo '{\"AccessKeyId\": \"A\", \"SecretAccessKey\": \"S\"}'\n")).status();
  EXPECT_TRUE(Contains(s.message(), "Version is not 1"));

  s = Run("stoker-no-such-helper arg").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(s.message(), "credential_process `stoker-no-such-helper arg`: cannot run"));

  s = Run("helper 'unclosed").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.message(), "profile train credential_process `helper 'unclosed`: "));
}

// A credential_process whose every run gives a new key, KEY<n> (n counted
// in a file beside it), lasting 20 s from now; runs after the first wait
// for a line on the FIFO "gate" beside it, where there is one.
constexpr char kCounting[] = R"sh(dir=$(dirname "$0")
n=$(( $(cat "$dir/count" 2>/dev/null || echo 0) + 1 ))
echo $n > "$dir/count"
if [ "$n" -gt 1 ] && [ -p "$dir/gate" ]; then read line < "$dir/gate"; fi
expires=$(date -u -d "@$(( $(date +%s) + 20 ))" +%Y-%m-%dT%H:%M:%SZ)
printf '{"Version": 1, "AccessKeyId": "KEY%s", "SecretAccessKey": "s", ' $n
printf '"Expiration": "%s"}' $expires
)sh";

std::unique_ptr<ProcessCredentialSource> ProcessCredentialsTest::Counting() {
  auto source = ProcessCredentialSource::Create("train", Script("bin/creds", kCounting),
                                                clock_.clock());
  EXPECT_TRUE(source.ok()) << source.status();
  if (!source.ok()) return nullptr;
  EXPECT_EQ(KeyOrError(source->get()), "KEY1");
  return *std::move(source);
}

TEST_F(ProcessCredentialsTest, RunsAgainWhenDue) {
  std::unique_ptr<ProcessCredentialSource> source = Counting();
  ASSERT_NE(source, nullptr);
  clock_.Set(start_ + absl::Seconds(5));  // About 15 s of 20 left.
  EXPECT_EQ(KeyOrError(source.get()), "KEY1");
  clock_.Set(start_ + absl::Seconds(15));  // About 5 s left: less than half.
  EXPECT_EQ(KeyOrError(source.get()), "KEY2");
  EXPECT_EQ(KeyOrError(source.get()), "KEY2");
  EXPECT_EQ(Count(), "2");
}

TEST_F(ProcessCredentialsTest, ManyCallersDuringARefreshOneRun) {
  std::unique_ptr<ProcessCredentialSource> source = Counting();
  ASSERT_NE(source, nullptr);
  const std::string gate = home_ + "/bin/gate";
  ASSERT_EQ(mkfifo(gate.c_str(), 0600), 0);
  clock_.Set(start_ + absl::Seconds(15));
  ConcurrentCalls calls(16, [&] { return KeyOrError(source.get()); });
  calls.WaitFor(15);  // All but the one whose run waits at the gate.
  std::ofstream(gate) << "go\n";
  std::vector<std::string> got = calls.Join();
  EXPECT_EQ(std::count(got.begin(), got.end(), "KEY1"), 15);
  EXPECT_EQ(got.back(), "KEY2");
  EXPECT_EQ(Count(), "2");
}

}  // namespace
}  // namespace stoker
