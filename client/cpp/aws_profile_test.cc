#include "client/cpp/aws_profile.h"

#include <gtest/gtest.h>

#include "client/cpp/aws_testing.h"

namespace stoker {
namespace {

using AwsProfileTest = AwsTest;

TEST_F(AwsProfileTest, NoFilesIsAnEmptyDefault) {
  absl::StatusOr<AwsProfile> p = LoadAwsProfile(getenv());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->name, "default");
  EXPECT_EQ(p->credentials_file, home_ + "/.aws/credentials");
  EXPECT_EQ(p->config_file, home_ + "/.aws/config");
  EXPECT_FALSE(p->Has("region"));
}

TEST_F(AwsProfileTest, CredentialsFileComesFirst) {
  Write("credentials",
        "# comment\n; another\n[default]\nregion=from-creds\n\n"
        "[train]\n AWS_ACCESS_KEY_ID = TRAIN \nempty =\n");
  Write("config",
        "[default]\nregion = us-west-2\nonly = c\n[profile train]\nregion = eu-central-1\n"
        "empty = from-config\n[train]\nregion = not-a-config-section\n");
  absl::StatusOr<AwsProfile> p = LoadAwsProfile(getenv());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->Get("region"), "from-creds");
  EXPECT_EQ(p->Get("only"), "c");
  env_["AWS_PROFILE"] = "train";
  p = LoadAwsProfile(getenv());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->name, "train");
  EXPECT_EQ(p->Get("aws_access_key_id"), "TRAIN");  // Keys lower-cased, values trimmed.
  EXPECT_EQ(p->Get("region"), "eu-central-1");
  EXPECT_EQ(p->Get("empty"), "from-config");  // An empty value is no value.
  EXPECT_EQ(p->in_credentials.count("region"), 0u);
}

TEST_F(AwsProfileTest, NamedProfileMustExist) {
  Write("config", "[profile config-only]\nregion = r\n");
  env_["AWS_PROFILE"] = "config-only";
  EXPECT_EQ(LoadAwsProfile(getenv())->Get("region"), "r");
  env_["AWS_PROFILE"] = "missing";
  absl::Status s = LoadAwsProfile(getenv()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("missing"), std::string::npos) << s;
  EXPECT_NE(s.message().find(home_ + "/.aws/config"), std::string::npos) << s;
  // Files named by variables.
  env_["AWS_SHARED_CREDENTIALS_FILE"] = Write("elsewhere/creds", "[missing]\nregion = o\n");
  env_["AWS_CONFIG_FILE"] = Write("elsewhere/config", "[default]\nregion = d\n");
  EXPECT_EQ(LoadAwsProfile(getenv())->Get("region"), "o");
  env_.erase("AWS_PROFILE");
  EXPECT_EQ(LoadAwsProfile(getenv())->Get("region"), "d");
}

}  // namespace
}  // namespace stoker
