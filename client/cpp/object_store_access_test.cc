#include "client/cpp/object_store_access.h"

#include <gtest/gtest.h>

#include "client/cpp/aws_testing.h"

namespace stoker {
namespace {

class ObjectStoreAccessTest : public AwsTest {
 protected:
  absl::StatusOr<v1::ObjectStoreAccess> Resolve() {
    return ObjectStoreAccessFromEnvironment(getenv());
  }
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
  EXPECT_EQ(Resolve().status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace stoker
