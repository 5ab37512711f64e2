#include "client/cpp/credential_source.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "client/cpp/aws_testing.h"

namespace stoker {
namespace {

TEST(ParseIso8601Test, AsAwsWritesThem) {
  const absl::Time t = absl::FromUnixSeconds(1796569200);  // 2026-12-06T15:00:00Z
  EXPECT_EQ(*ParseIso8601("2026-12-06T15:00:00Z"), t);
  EXPECT_EQ(*ParseIso8601("2026-12-06T15:00:00.250Z"), t + absl::Milliseconds(250));
  EXPECT_EQ(*ParseIso8601("2026-12-06T15:00:00+00:00"), t);
  EXPECT_EQ(*ParseIso8601("2026-12-06T17:00:00.000000+02:00"), t);
  EXPECT_EQ(*ParseIso8601("2026-12-06T15:00:00"), t);  // No zone: UTC.
  EXPECT_EQ(ParseIso8601("tomorrow").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CredentialsFromJsonTest, MembersAndChecks) {
  absl::StatusOr<AwsCredentials> c = CredentialsFromJson(
      R"({"Version": 1, "AccessKeyId": "ASIA1", "SecretAccessKey": "s3cr3t",
          "SessionToken": "tok", "Expiration": "2026-12-06T15:00:00Z", "Other": [1]})",
      "SessionToken", true);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "ASIA1");
  EXPECT_EQ(c->secret_access_key, "s3cr3t");
  EXPECT_EQ(c->session_token, "tok");
  EXPECT_EQ(c->expiration, absl::FromUnixSeconds(1796569200));
  c = CredentialsFromJson(R"({"Code": "Success", "AccessKeyId": "A", "SecretAccessKey": "S",
                              "Token": "t"})", "Token", false);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->session_token, "t");
  EXPECT_EQ(c->expiration, absl::InfiniteFuture());  // No Expiration: never.

  for (const char* bad : {
           R"({"AccessKeyId": "A", "SecretAccessKey": "S"})",                  // No Version.
           R"({"Version": 2, "AccessKeyId": "A", "SecretAccessKey": "S"})",    // Unknown one.
           R"({"Version": 1, "AccessKeyId": "A"})",                            // No secret.
           R"({"Version": 1, "AccessKeyId": 7, "SecretAccessKey": "S"})",      // Not a string.
           R"({"Version": 1, "AccessKeyId": "A", "SecretAccessKey": "S", "Expiration": "x"})",
           R"({"Version": 1, "Code": "Failed", "AccessKeyId": "A", "SecretAccessKey": "S"})",
           R"([1, 2])",
           R"({"Version": 1, "AccessKeyId": "A", "SecretAccessKey": "TOPSECRET)",
       }) {
    absl::Status s = CredentialsFromJson(bad, "SessionToken", true).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << bad;
    EXPECT_FALSE(Contains(s.message(), "SECRET"));
  }
}

// A source whose fetches the test scripts: each gives key "K<n>" lasting
// `lifetime` from the clock, or the error set; a gate, when set, holds
// each fetch until the test opens it.
class ScriptedSource : public RefreshingSource {
 public:
  ScriptedSource(FakeClock* clock, absl::Duration lifetime)
      : RefreshingSource(clock->clock()), clock_(clock), lifetime_(lifetime) {}
  std::string description() const override { return "scripted"; }
  int fetches() const { return fetches_.load(); }
  void Fail(absl::Status s) { error_ = std::move(s); }
  void HoldFetches(absl::Notification* gate) { gate_ = gate; }

 protected:
  absl::StatusOr<AwsCredentials> Fetch() override {
    const int n = ++fetches_;
    if (gate_ != nullptr) gate_->WaitForNotification();
    if (!error_.ok()) return error_;
    return AwsCredentials{absl::StrCat("K", n), "secret", "", clock_->Now() + lifetime_};
  }

 private:
  FakeClock* const clock_;
  const absl::Duration lifetime_;
  std::atomic<int> fetches_{0};
  absl::Status error_;
  absl::Notification* gate_ = nullptr;
};

TEST(RefreshingSourceTest, RefreshesInTheLastHalfOrFiveMinutes) {
  EXPECT_EQ(RefreshingSource::RefreshLead(absl::Seconds(20)), absl::Seconds(10));
  EXPECT_EQ(RefreshingSource::RefreshLead(absl::Hours(12)), absl::Minutes(5));
  FakeClock clock;
  const absl::Time start = clock.Now();
  ScriptedSource source(&clock, absl::Minutes(15));
  EXPECT_EQ(source.Get()->access_key_id, "K1");
  clock.Set(start + absl::Minutes(9) + absl::Seconds(59));
  EXPECT_EQ(source.Get()->access_key_id, "K1");
  EXPECT_EQ(source.fetches(), 1);
  clock.Set(start + absl::Minutes(10) + absl::Seconds(1));  // 4:59 left.
  EXPECT_EQ(source.Get()->access_key_id, "K2");
  EXPECT_EQ(source.Get()->expiration, clock.Now() + absl::Minutes(15));
  EXPECT_EQ(source.fetches(), 2);
}

TEST(RefreshingSourceTest, FailedRefreshKeepsTheCurrentOnesWhileTheyLast) {
  FakeClock clock;
  const absl::Time start = clock.Now();
  ScriptedSource source(&clock, absl::Seconds(20));
  ASSERT_EQ(source.Get()->access_key_id, "K1");
  source.Fail(absl::UnavailableError("scripted: down"));
  clock.Set(start + absl::Seconds(11));
  EXPECT_EQ(source.Get()->access_key_id, "K1");  // Fetch 2 failed.
  clock.Set(start + absl::Seconds(15));
  EXPECT_EQ(source.Get()->access_key_id, "K1");  // Not retried yet.
  EXPECT_EQ(source.fetches(), 2);
  clock.Set(start + absl::Seconds(20));  // Expired: the last error, not a fetch a call.
  EXPECT_EQ(source.Get().status().message(), "scripted: down");
  EXPECT_EQ(source.fetches(), 2);
  clock.Set(start + absl::Seconds(21));  // 10 s after the failure: tried again, once.
  EXPECT_EQ(source.Get().status().message(), "scripted: down");
  EXPECT_EQ(source.Get().status().message(), "scripted: down");
  EXPECT_EQ(source.fetches(), 3);
  source.Fail(absl::OkStatus());
  clock.Set(start + absl::Seconds(31));
  EXPECT_EQ(source.Get()->access_key_id, "K4");

  ScriptedSource stale(&clock, absl::ZeroDuration());  // Expired when given.
  absl::Status s = stale.Get().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(Contains(s.message(), "scripted: the credentials it gave expired"));
}

// A ScriptedSource lasting 20 s that gave K1 at start_; Callers(after)
// sets the clock to start_ + after, holds the fetches at gate_ and has 16
// threads Get() at once.
class HeldRefreshTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(source_.Get()->access_key_id, "K1"); }
  std::unique_ptr<ConcurrentCalls> Callers(absl::Duration after) {
    source_.HoldFetches(&gate_);
    clock_.Set(start_ + after);
    return std::make_unique<ConcurrentCalls>(16, [this] { return KeyOrError(&source_); });
  }

  FakeClock clock_;
  const absl::Time start_ = clock_.Now();
  ScriptedSource source_{&clock_, absl::Seconds(20)};
  absl::Notification gate_;
};

TEST_F(HeldRefreshTest, OneFetchWhileOthersUseTheCurrentOnes) {
  std::unique_ptr<ConcurrentCalls> callers = Callers(absl::Seconds(12));
  callers->WaitFor(15);  // All but the one fetching, with the fetch held.
  EXPECT_EQ(source_.fetches(), 2);
  gate_.Notify();
  std::vector<std::string> got = callers->Join();
  EXPECT_EQ(std::count(got.begin(), got.end(), "K1"), 15);
  EXPECT_EQ(got.back(), "K2");
  EXPECT_EQ(source_.fetches(), 2);
}

TEST_F(HeldRefreshTest, AllWaitForOneFetchOnceExpired) {
  std::unique_ptr<ConcurrentCalls> callers = Callers(absl::Seconds(21));
  while (source_.fetches() < 2) std::this_thread::yield();  // One is fetching...
  gate_.Notify();  // ... the rest wait for it, or come after it: either way K2.
  std::vector<std::string> got = callers->Join();
  EXPECT_EQ(std::count(got.begin(), got.end(), "K2"), 16);
  EXPECT_EQ(source_.fetches(), 2);
}

class CredentialChainTest : public AwsTest {
 protected:
  absl::StatusOr<std::shared_ptr<CredentialSource>> Resolve() {
    return CredentialsFromEnvironment(getenv());
  }
  // The description of what the chain finds, or its error.
  std::string Found() {
    absl::StatusOr<std::shared_ptr<CredentialSource>> s = Resolve();
    if (!s.ok()) return std::string(s.status().message());
    return *s == nullptr ? "none" : (*s)->description();
  }
};

TEST_F(CredentialChainTest, FirstThatAppliesWins) {
  EXPECT_EQ(Found(), "none");
  Write("config",
        "[default]\naws_access_key_id = CFG\naws_secret_access_key = c\n"
        "[profile train]\ncredential_process = /bin/false\n");
  EXPECT_EQ(Found(), "profile default (config file)");
  Write("credentials", "[default]\naws_access_key_id = CRED\naws_secret_access_key = s\n"
                       "aws_session_token = t\n[train]\naws_access_key_id = ONLYID\n");
  EXPECT_EQ(Found(), "profile default (credentials file)");
  absl::StatusOr<AwsCredentials> c = (*Resolve())->Get();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "CRED");
  EXPECT_EQ(c->session_token, "t");
  EXPECT_EQ(c->expiration, absl::InfiniteFuture());
  env_["AWS_PROFILE"] = "train";  // A key id alone is no key.
  EXPECT_EQ(Found(), "profile train credential_process");
  env_["AWS_ACCESS_KEY_ID"] = "ENV";
  EXPECT_EQ(Found(), "profile train credential_process");  // Both variables or neither.
  env_["AWS_SECRET_ACCESS_KEY"] = "e";
  env_["AWS_SESSION_TOKEN"] = "et";
  EXPECT_EQ(Found(), "environment");
  c = (*Resolve())->Get();
  EXPECT_EQ(c->access_key_id, "ENV");
  EXPECT_EQ(c->secret_access_key, "e");
  EXPECT_EQ(c->session_token, "et");
  env_["AWS_PROFILE"] = "missing";
  EXPECT_EQ(Resolve().status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CredentialChainTest, HttpsOnlySourcesSayHowToUseThemThroughTheCli) {
  Write("config", "[profile web]\nweb_identity_token_file = /t\nrole_arn = arn:r\n"
                  "[profile role]\nrole_arn = arn:r\nsource_profile = default\n"
                  "[profile sso]\nsso_session = corp\nsso_account_id = 1\n"
                  "[profile cli]\nsso_start_url = https://x\ncredential_process = aws x\n"
                  "[default]\naws_access_key_id = K\naws_secret_access_key = S\n");
  for (const char* profile : {"web", "role", "sso"}) {
    env_["AWS_PROFILE"] = profile;
    absl::Status s = Resolve().status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_TRUE(Contains(s.message(),
                         absl::StrCat("credential_process = aws configure export-credentials "
                                      "--profile ", profile, " --format process` (AWS CLI v2) "
                                      "to [profile ", profile, "] in ", home_, "/.aws/config")));
  }
  env_["AWS_PROFILE"] = "cli";  // Set as the message says.
  EXPECT_EQ(Found(), "profile cli credential_process");
  env_.erase("AWS_PROFILE");  // Web identity by the variables comes before the profile's keys.
  env_["AWS_WEB_IDENTITY_TOKEN_FILE"] = "/var/run/token";
  EXPECT_EQ(Found(), "profile default (config file)");  // Not without a role.
  env_["AWS_ROLE_ARN"] = "arn:aws:iam::1:role/r";
  absl::Status s = Resolve().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(Contains(s.message(), "AWS_WEB_IDENTITY_TOKEN_FILE"));
  EXPECT_TRUE(
      Contains(s.message(), "--profile default --format process` (AWS CLI v2) to [default]"));
}

}  // namespace
}  // namespace stoker
