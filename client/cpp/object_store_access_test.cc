#include "client/cpp/object_store_access.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

namespace stoker {
namespace {

class ObjectStoreAccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/stoker-aws-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    home_ = dir;
    env_["HOME"] = home_;
  }
  void TearDown() override { std::system(("rm -rf " + home_).c_str()); }

  void Write(const std::string& name, const std::string& text) {
    std::system(("mkdir -p " + home_ + "/.aws").c_str());
    std::ofstream(home_ + "/.aws/" + name) << text;
  }
  absl::StatusOr<v1::ObjectStoreAccess> Resolve() {
    return ObjectStoreAccessFromEnvironment([this](const char* name) -> const char* {
      auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    });
  }

  std::string home_;
  std::map<std::string, std::string> env_;
};

TEST_F(ObjectStoreAccessTest, NothingSetIsUsEast1AndNoKey) {
  absl::StatusOr<v1::ObjectStoreAccess> a = Resolve();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->access_key_id(), "");
  EXPECT_EQ(a->region(), "us-east-1");
  EXPECT_EQ(a->endpoint(), "https://s3.us-east-1.amazonaws.com");
}

TEST_F(ObjectStoreAccessTest, VariablesComeFirst) {
  Write("credentials", "[default]\naws_access_key_id = FROMFILE\naws_secret_access_key = s\n");
  env_["AWS_ACCESS_KEY_ID"] = "AKIAENV";
  env_["AWS_SECRET_ACCESS_KEY"] = "secret";
  env_["AWS_SESSION_TOKEN"] = "token";
  env_["AWS_DEFAULT_REGION"] = "eu-west-1";
  absl::StatusOr<v1::ObjectStoreAccess> a = Resolve();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->access_key_id(), "AKIAENV");
  EXPECT_EQ(a->secret_access_key(), "secret");
  EXPECT_EQ(a->session_token(), "token");
  EXPECT_EQ(a->region(), "eu-west-1");
  EXPECT_EQ(a->endpoint(), "https://s3.eu-west-1.amazonaws.com");
  env_["AWS_REGION"] = "ap-south-1";  // Over AWS_DEFAULT_REGION.
  env_["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9000";
  EXPECT_EQ(Resolve()->region(), "ap-south-1");
  EXPECT_EQ(Resolve()->endpoint(), "http://127.0.0.1:9000");
  env_["AWS_ENDPOINT_URL_S3"] = "https://minio.lab:9000";  // Over the general one.
  EXPECT_EQ(Resolve()->endpoint(), "https://minio.lab:9000");
}

TEST_F(ObjectStoreAccessTest, ProfilesFromBothFiles) {
  Write("credentials",
        "# comment\n[default]\naws_access_key_id=DEF\naws_secret_access_key=defsecret\n\n"
        "[train]\n AWS_ACCESS_KEY_ID = TRAIN \naws_secret_access_key = trainsecret\n"
        "aws_session_token = tok\n");
  Write("config",
        "[default]\nregion = us-west-2\n[profile train]\nregion = eu-central-1\n"
        "endpoint_url = https://ceph.lab\n[profile config-only]\n"
        "aws_access_key_id = CFG\naws_secret_access_key = cfgsecret\n");
  absl::StatusOr<v1::ObjectStoreAccess> a = Resolve();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->access_key_id(), "DEF");
  EXPECT_EQ(a->region(), "us-west-2");
  env_["AWS_PROFILE"] = "train";
  a = Resolve();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->access_key_id(), "TRAIN");
  EXPECT_EQ(a->secret_access_key(), "trainsecret");
  EXPECT_EQ(a->session_token(), "tok");
  EXPECT_EQ(a->region(), "eu-central-1");
  EXPECT_EQ(a->endpoint(), "https://ceph.lab");
  env_["AWS_PROFILE"] = "config-only";
  EXPECT_EQ(Resolve()->access_key_id(), "CFG");
  env_["AWS_PROFILE"] = "missing";
  absl::Status s = Resolve().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("missing"), std::string::npos) << s;
  // Files named by variables.
  std::ofstream(home_ + "/other") << "[missing]\naws_access_key_id = OTHER\n"
                                     "aws_secret_access_key = o\n";
  env_["AWS_SHARED_CREDENTIALS_FILE"] = home_ + "/other";
  EXPECT_EQ(Resolve()->access_key_id(), "OTHER");
}

}  // namespace
}  // namespace stoker
