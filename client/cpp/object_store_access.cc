#include "client/cpp/object_store_access.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace stoker {
namespace {

using Sections = std::map<std::string, std::map<std::string, std::string>>;

// An AWS INI file: "[section]" lines, "key = value" lines, '#' and ';'
// comments; keys lower-cased. A missing file is no sections. Files over
// 1 MiB are read no further.
Sections ReadIni(const std::string& path) {
  Sections out;
  std::ifstream in(path);
  std::string line, section;
  size_t read = 0;
  while (std::getline(in, line) && (read += line.size()) < (1 << 20)) {
    absl::string_view l = absl::StripAsciiWhitespace(line);
    if (l.empty() || l[0] == '#' || l[0] == ';') continue;
    if (l.front() == '[' && l.back() == ']') {
      section = std::string(absl::StripAsciiWhitespace(l.substr(1, l.size() - 2)));
      continue;
    }
    const size_t eq = l.find('=');
    if (eq == absl::string_view::npos || section.empty()) continue;
    out[section][absl::AsciiStrToLower(absl::StripAsciiWhitespace(l.substr(0, eq)))] =
        std::string(absl::StripAsciiWhitespace(l.substr(eq + 1)));
  }
  return out;
}

}  // namespace

absl::StatusOr<v1::ObjectStoreAccess> ObjectStoreAccessFromEnvironment(
    const std::function<const char*(const char*)>& getenv_fn) {
  auto env = [&](const char* name) -> std::string {
    const char* v = getenv_fn ? getenv_fn(name) : std::getenv(name);
    return v == nullptr ? std::string() : std::string(v);
  };
  const std::string home = env("HOME");
  const std::string profile = env("AWS_PROFILE").empty() ? "default" : env("AWS_PROFILE");
  const std::string credentials_file = !env("AWS_SHARED_CREDENTIALS_FILE").empty()
                                           ? env("AWS_SHARED_CREDENTIALS_FILE")
                                           : home + "/.aws/credentials";
  const std::string config_file =
      !env("AWS_CONFIG_FILE").empty() ? env("AWS_CONFIG_FILE") : home + "/.aws/config";
  const Sections creds = ReadIni(credentials_file);
  const Sections config = ReadIni(config_file);
  const auto* in_creds = creds.count(profile) ? &creds.at(profile) : nullptr;
  const std::string config_section = profile == "default" ? profile : "profile " + profile;
  const auto* in_config = config.count(config_section) ? &config.at(config_section) : nullptr;
  if (!env("AWS_PROFILE").empty() && in_creds == nullptr && in_config == nullptr) {
    return absl::NotFoundError(absl::StrCat("AWS_PROFILE ", profile, ": no such profile in ",
                                            credentials_file, " or ", config_file));
  }
  // The profile's `key`: the credentials file's, then the config file's.
  auto from_profile = [&](const char* key) -> std::string {
    for (const auto* s : {in_creds, in_config}) {
      if (s != nullptr) {
        auto it = s->find(key);
        if (it != s->end()) return it->second;
      }
    }
    return "";
  };
  v1::ObjectStoreAccess a;
  if (!env("AWS_ACCESS_KEY_ID").empty() && !env("AWS_SECRET_ACCESS_KEY").empty()) {
    a.set_access_key_id(env("AWS_ACCESS_KEY_ID"));
    a.set_secret_access_key(env("AWS_SECRET_ACCESS_KEY"));
    a.set_session_token(env("AWS_SESSION_TOKEN"));
  } else {
    a.set_access_key_id(from_profile("aws_access_key_id"));
    a.set_secret_access_key(from_profile("aws_secret_access_key"));
    a.set_session_token(from_profile("aws_session_token"));
  }
  std::string region = env("AWS_REGION");
  if (region.empty()) region = env("AWS_DEFAULT_REGION");
  if (region.empty()) region = from_profile("region");
  if (region.empty()) region = "us-east-1";
  a.set_region(region);
  std::string endpoint = env("AWS_ENDPOINT_URL_S3");
  if (endpoint.empty()) endpoint = env("AWS_ENDPOINT_URL");
  if (endpoint.empty()) endpoint = from_profile("endpoint_url");
  if (endpoint.empty()) endpoint = absl::StrCat("https://s3.", region, ".amazonaws.com");
  a.set_endpoint(endpoint);
  return a;
}

}  // namespace stoker
