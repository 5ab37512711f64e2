#include "client/cpp/object_store_access.h"

#include "absl/strings/str_cat.h"
#include "client/cpp/aws_profile.h"
#include "util/status_macros.h"

namespace stoker {

absl::StatusOr<v1::ObjectStoreAccess> ObjectStoreAccessFromEnvironment(
    const std::function<const char*(const char*)>& getenv_fn) {
  STOKER_ASSIGN_OR_RETURN(const AwsProfile profile, LoadAwsProfile(getenv_fn));
  auto env = [&](const char* name) { return EnvValue(getenv_fn, name); };
  v1::ObjectStoreAccess a;
  if (!env("AWS_ACCESS_KEY_ID").empty() && !env("AWS_SECRET_ACCESS_KEY").empty()) {
    a.set_access_key_id(env("AWS_ACCESS_KEY_ID"));
    a.set_secret_access_key(env("AWS_SECRET_ACCESS_KEY"));
    a.set_session_token(env("AWS_SESSION_TOKEN"));
  } else {
    a.set_access_key_id(profile.Get("aws_access_key_id"));
    a.set_secret_access_key(profile.Get("aws_secret_access_key"));
    a.set_session_token(profile.Get("aws_session_token"));
  }
  std::string region = env("AWS_REGION");
  if (region.empty()) region = env("AWS_DEFAULT_REGION");
  if (region.empty()) region = profile.Get("region");
  if (region.empty()) region = "us-east-1";
  a.set_region(region);
  std::string endpoint = env("AWS_ENDPOINT_URL_S3");
  if (endpoint.empty()) endpoint = env("AWS_ENDPOINT_URL");
  if (endpoint.empty()) endpoint = profile.Get("endpoint_url");
  if (endpoint.empty()) endpoint = absl::StrCat("https://s3.", region, ".amazonaws.com");
  a.set_endpoint(endpoint);
  return a;
}

}  // namespace stoker
