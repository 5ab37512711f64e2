#include "client/cpp/http_credentials.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/cpp/aws_testing.h"
#include "client/cpp/http_testing.h"

namespace stoker {
namespace {

// A container credentials endpoint at /creds that wants `token_` as the
// Authorization header: each answer a new key, CKEY<n>, lasting 20 s.
class ContainerCredentialsTest : public AwsTest {
 protected:
  void SetUp() override {
    AwsTest::SetUp();
    env_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = server_.url("/creds");
  }
  std::string Answer(const http_testing::Request& r) {
    if (r.target != "/creds") return http_testing::Answer(404, "no such path");
    auto it = r.headers.find("authorization");
    if (it == r.headers.end() || it->second != token()) {
      return http_testing::Answer(401, "{\"Message\": \"bad token\"}\n");
    }
    const int n = ++answers_;
    return http_testing::Answer(
        200, absl::StrCat("{\"AccessKeyId\": \"CKEY", n, "\", \"SecretAccessKey\": \"cs\", "
                          "\"Token\": \"ctok", n, "\", \"RoleArn\": \"arn:r\", \"Expiration\": \"",
                          absl::FormatTime(absl::RFC3339_full, absl::Now() + absl::Seconds(20),
                                           absl::UTCTimeZone()),
                          "\"}"));
  }
  std::string token() {
    absl::MutexLock lock(&mu_);
    return token_;
  }
  void set_token(const std::string& t) {
    absl::MutexLock lock(&mu_);
    token_ = t;
  }
  std::unique_ptr<ContainerCredentialSource> Source(Clock clock = nullptr) {
    absl::StatusOr<std::unique_ptr<ContainerCredentialSource>> s =
        ContainerCredentialSource::FromEnvironment(getenv(), std::move(clock));
    EXPECT_TRUE(s.ok() && *s != nullptr) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }

  absl::Mutex mu_;
  std::string token_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> answers_{0};
  http_testing::Server server_{[this](const http_testing::Request& r) { return Answer(r); }};
};

TEST_F(ContainerCredentialsTest, FetchesWithTheTokenOfTheVariable) {
  set_token("Bearer env-token");
  env_["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "Bearer env-token";
  absl::StatusOr<std::shared_ptr<CredentialSource>> chain = CredentialsFromEnvironment(getenv());
  ASSERT_TRUE(chain.ok() && *chain != nullptr) << chain.status();
  EXPECT_EQ((*chain)->description(), "container credentials " + server_.url("/creds"));
  absl::StatusOr<AwsCredentials> c = (*chain)->Get();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "CKEY1");
  EXPECT_EQ(c->secret_access_key, "cs");
  EXPECT_EQ(c->session_token, "ctok1");
  EXPECT_LT(c->expiration, absl::Now() + absl::Seconds(21));
  EXPECT_EQ(server_.requests().at(0).method, "GET");

  env_["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "Bearer wrong-token";
  absl::Status s = Source()->Get().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), absl::StrCat("container credentials ", server_.url("/creds"),
                                      ": HTTP 401: {\"Message\": \"bad token\"}"));
  env_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = server_.url("/elsewhere");
  EXPECT_TRUE(Contains(Source()->Get().status().message(), "HTTP 404: no such path"));
}

TEST_F(ContainerCredentialsTest, ReadsTheTokenFileAtEachFetch) {
  env_["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "not used when there is a file";
  env_["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"] = Write("run/token", "first\n");
  set_token("first");
  FakeClock clock;
  const absl::Time start = clock.Now();
  std::unique_ptr<ContainerCredentialSource> source = Source(clock.clock());
  EXPECT_EQ(KeyOrError(source.get()), "CKEY1");
  Write("run/token", "second");  // Rotated.
  set_token("second");
  EXPECT_EQ(KeyOrError(source.get()), "CKEY1");  // Cached.
  clock.Set(start + absl::Seconds(15));
  EXPECT_EQ(KeyOrError(source.get()), "CKEY2");
  EXPECT_EQ(server_.requests().back().headers.at("authorization"), "second");

  Write("run/token", "two\nlines");
  clock.Set(start + absl::Seconds(60));
  absl::Status s = source->Get().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(s.message(), "the authorization token holds a line break"));
  EXPECT_FALSE(Contains(s.message(), "lines"));
  std::remove(env_["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"].c_str());
  clock.Set(start + absl::Seconds(70));  // Tried again 10 s after a failure.
  EXPECT_TRUE(Contains(source->Get().status().message(),
                       "cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"));
}

TEST_F(ContainerCredentialsTest, OnlyTheHostsTheSdksAllow) {
  env_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] =
      absl::StrCat("http://localhost:", server_.port(), "/creds");
  EXPECT_NE(Source(), nullptr);
  for (const char* refused : {"http://192.0.2.10/creds", "http://169.254.169.254/creds",
                              "https://127.0.0.1/creds", "file:///etc/passwd"}) {
    env_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = refused;
    absl::Status s = CredentialsFromEnvironment(getenv()).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << refused;
    EXPECT_TRUE(Contains(s.message(), "AWS_CONTAINER_CREDENTIALS_FULL_URI")) << refused;
  }
  EXPECT_TRUE(Contains(
      CredentialsFromEnvironment(getenv()).status().message(), "not an http:// URL"));
  env_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = "http://192.0.2.10/creds";
  EXPECT_TRUE(Contains(CredentialsFromEnvironment(getenv()).status().message(),
                       "host 192.0.2.10 (192.0.2.10) is not allowed"));
  env_["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"] = "/v2/credentials/abc";  // Comes first.
  EXPECT_EQ(Source()->description(),
            "container credentials http://169.254.170.2/v2/credentials/abc");
  env_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = "http://[fd00:ec2::23]/v1/credentials";
  env_.erase("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  EXPECT_NE(Source(), nullptr);
}

// An instance metadata service: IMDSv2's token, then role `role_` and
// its credentials, IKEY<n>.
class InstanceMetadataTest : public AwsTest {
 protected:
  void SetUp() override {
    AwsTest::SetUp();
    env_.erase("AWS_EC2_METADATA_DISABLED");
    env_["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = server_.url("/");
  }
  std::string Answer(const http_testing::Request& r) {
    constexpr char kRoles[] = "/latest/meta-data/iam/security-credentials/";
    if (r.method == "PUT" && r.target == "/latest/api/token") {
      auto ttl = r.headers.find("x-aws-ec2-metadata-token-ttl-seconds");
      return ttl == r.headers.end() ? http_testing::Answer(400, "")
                                    : http_testing::Answer(200, "imds-token");
    }
    auto token = r.headers.find("x-aws-ec2-metadata-token");
    if (token == r.headers.end() || token->second != "imds-token") {
      return http_testing::Answer(401, "");
    }
    if (r.method == "GET" && r.target == kRoles) return http_testing::Answer(200, role_ + "\n");
    if (r.method == "GET" && r.target == kRoles + role_ && !role_.empty()) {
      return http_testing::Answer(
          200, absl::StrCat("{\"Code\": \"Success\", \"Type\": \"AWS-HMAC\", \"AccessKeyId\": "
                            "\"IKEY", ++answers_, "\", \"SecretAccessKey\": \"is\", \"Token\": "
                            "\"itok\", \"Expiration\": \"2126-01-01T00:00:00Z\"}"));
    }
    return http_testing::Answer(404, "");
  }
  std::string Found() {
    absl::StatusOr<std::shared_ptr<CredentialSource>> s = CredentialsFromEnvironment(getenv());
    if (!s.ok()) return std::string(s.status().message());
    return *s == nullptr ? "none" : absl::StrCat((*s)->description(), " ", KeyOrError(s->get()));
  }

  std::string role_ = "trainer-role";
  std::atomic<int> answers_{0};
  http_testing::Server server_{[this](const http_testing::Request& r) { return Answer(r); }};
};

TEST_F(InstanceMetadataTest, LastInTheChainWhenItAnswers) {
  EXPECT_EQ(Found(), absl::StrCat("instance metadata ", server_.url(""), " IKEY1"));
  EXPECT_EQ(server_.requests().size(), 3u);
  env_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = server_.url("/creds");
  const std::string container = "container credentials " + server_.url("/creds");
  EXPECT_EQ(Found(), container + " " + container + ": HTTP 401: ");  // Before it, failing.
  env_.erase("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  env_["AWS_EC2_METADATA_DISABLED"] = "TRUE";
  EXPECT_EQ(Found(), "none");
  EXPECT_EQ(server_.requests().size(), 4u);
}

TEST_F(InstanceMetadataTest, NoRoleOrNoServiceIsNoCredentials) {
  role_ = "";
  EXPECT_EQ(Found(), "none");
  auto source = InstanceMetadataSource::FromEnvironment(getenv());
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->Get().status().message(),
            absl::StrCat("instance metadata ", server_.url(""), ": the instance has no IAM role"));
  uint16_t port = 0;
  ::close(loopback_testing::Listen(&port));  // Nothing listens there.
  env_["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = absl::StrCat("http://127.0.0.1:", port);
  const absl::Time start = absl::Now();
  EXPECT_EQ(Found(), "none");
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  env_["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = "https://169.254.169.254";
  EXPECT_TRUE(Contains(Found(), "AWS_EC2_METADATA_SERVICE_ENDPOINT"));
  env_.erase("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  EXPECT_EQ((*InstanceMetadataSource::FromEnvironment(getenv()))->description(),
            "instance metadata http://169.254.169.254");
  env_["AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"] = "IPv6";
  EXPECT_EQ((*InstanceMetadataSource::FromEnvironment(getenv()))->description(),
            "instance metadata http://[fd00:ec2::254]");
}

}  // namespace
}  // namespace stoker
