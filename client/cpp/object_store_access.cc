#include "client/cpp/object_store_access.h"

#include "absl/strings/str_cat.h"
#include "client/cpp/aws_profile.h"
#include "util/status_macros.h"

namespace stoker {

absl::StatusOr<TrainerObjectStore> ObjectStoreAccessFromEnvironment(
    const std::function<const char*(const char*)>& getenv_fn) {
  STOKER_ASSIGN_OR_RETURN(const AwsProfile profile, LoadAwsProfile(getenv_fn));
  auto env = [&](const char* name) { return EnvValue(getenv_fn, name); };
  TrainerObjectStore out;
  STOKER_ASSIGN_OR_RETURN(out.credentials, CredentialsFromProfile(profile, getenv_fn));
  if (out.credentials != nullptr) {
    STOKER_ASSIGN_OR_RETURN(const AwsCredentials first, out.credentials->Get());
    out.access.set_access_key_id(first.access_key_id);
  }
  std::string region = env("AWS_REGION");
  if (region.empty()) region = env("AWS_DEFAULT_REGION");
  if (region.empty()) region = profile.Get("region");
  if (region.empty()) region = "us-east-1";
  out.access.set_region(region);
  std::string endpoint = env("AWS_ENDPOINT_URL_S3");
  if (endpoint.empty()) endpoint = env("AWS_ENDPOINT_URL");
  if (endpoint.empty()) endpoint = profile.Get("endpoint_url");
  if (endpoint.empty()) endpoint = absl::StrCat("https://s3.", region, ".amazonaws.com");
  out.access.set_endpoint(endpoint);
  return out;
}

}  // namespace stoker
