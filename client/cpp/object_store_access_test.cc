#include "client/cpp/object_store_access.h"

#include <gtest/gtest.h>

#include "client/cpp/aws_testing.h"

namespace stoker {
namespace {

class ObjectStoreAccessTest : public AwsTest {
 protected:
  absl::StatusOr<TrainerObjectStore> Resolve() {
    return ObjectStoreAccessFromEnvironment(getenv());
  }
};

TEST_F(ObjectStoreAccessTest, NothingSetIsUsEast1AndNoKey) {
  absl::StatusOr<TrainerObjectStore> a = Resolve();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->credentials, nullptr);
  EXPECT_EQ(a->access.access_key_id(), "");
  EXPECT_EQ(a->access.region(), "us-east-1");
  EXPECT_EQ(a->access.endpoint(), "https://s3.us-east-1.amazonaws.com");
}

TEST_F(ObjectStoreAccessTest, VariablesComeFirstAndTheSecretStaysHere) {
  Write("credentials", "[default]\naws_access_key_id = FROMFILE\naws_secret_access_key = s\n");
  env_["AWS_ACCESS_KEY_ID"] = "AKIAENV";
  env_["AWS_SECRET_ACCESS_KEY"] = "secret";
  env_["AWS_SESSION_TOKEN"] = "token";
  env_["AWS_DEFAULT_REGION"] = "eu-west-1";
  absl::StatusOr<TrainerObjectStore> a = Resolve();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->access.access_key_id(), "AKIAENV");
  EXPECT_EQ(a->access.secret_access_key(), "");
  EXPECT_EQ(a->access.session_token(), "");
  ASSERT_NE(a->credentials, nullptr);
  EXPECT_EQ(a->credentials->description(), "environment");
  EXPECT_EQ(a->credentials->Get()->secret_access_key, "secret");
  EXPECT_EQ(a->credentials->Get()->session_token, "token");
  EXPECT_EQ(a->access.region(), "eu-west-1");
  EXPECT_EQ(a->access.endpoint(), "https://s3.eu-west-1.amazonaws.com");
  env_["AWS_REGION"] = "ap-south-1";  // Over AWS_DEFAULT_REGION.
  env_["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9000";
  EXPECT_EQ(Resolve()->access.region(), "ap-south-1");
  EXPECT_EQ(Resolve()->access.endpoint(), "http://127.0.0.1:9000");
  env_["AWS_ENDPOINT_URL_S3"] = "https://minio.lab:9000";  // Over the general one.
  EXPECT_EQ(Resolve()->access.endpoint(), "https://minio.lab:9000");
}

TEST_F(ObjectStoreAccessTest, TheProfilesRegionEndpointAndKeys) {
  Write("credentials", "[train]\naws_access_key_id = TRAIN\naws_secret_access_key = t\n");
  Write("config", "[default]\nregion = us-west-2\n[profile train]\nregion = eu-central-1\n"
                  "endpoint_url = https://ceph.lab\n");
  absl::StatusOr<TrainerObjectStore> a = Resolve();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->access.region(), "us-west-2");
  env_["AWS_PROFILE"] = "train";
  a = Resolve();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->access.access_key_id(), "TRAIN");
  EXPECT_EQ(a->access.region(), "eu-central-1");
  EXPECT_EQ(a->access.endpoint(), "https://ceph.lab");
  env_["AWS_PROFILE"] = "missing";
  EXPECT_EQ(Resolve().status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ObjectStoreAccessTest, TheFirstKeyIdOfAProcessAndItsErrors) {
  Write("config", "[profile ok]\ncredential_process = echo '{\"Version\":1,"
                  "\"AccessKeyId\":\"PROC\",\"SecretAccessKey\":\"p\"}'\n"
                  "[profile failing]\ncredential_process = sh -c 'echo no >&2; exit 3'\n");
  env_["AWS_PROFILE"] = "ok";
  absl::StatusOr<TrainerObjectStore> a = Resolve();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->access.access_key_id(), "PROC");
  EXPECT_EQ(a->credentials->description(), "profile ok credential_process");
  env_["AWS_PROFILE"] = "failing";
  EXPECT_EQ(Resolve().status().message(),
            "credential_process `sh -c 'echo no >&2; exit 3'` exited 3: no");
}

}  // namespace
}  // namespace stoker
