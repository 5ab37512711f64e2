// The trainer's AWS profile, read as the AWS SDKs read it: the profile is
// AWS_PROFILE, else "default"; its settings come from the shared
// credentials file (AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials;
// section "[NAME]") and from the config file (AWS_CONFIG_FILE, else
// ~/.aws/config; section "[profile NAME]", or "[default]"). Both files are
// AWS's INI: "[section]" lines, "key = value" lines, '#' and ';' comment
// lines; keys are lower-cased; a missing file has no sections; a file is
// read no further than its first MiB. An AWS_PROFILE that is in neither
// file is NOT_FOUND naming the profile and both files.
//
// Used by the object store access (region, endpoint) and the credential
// chain, so that both see one profile. Values are returned, never logged.
// Stateless; thread-safe.
#ifndef STOKER_CLIENT_CPP_AWS_PROFILE_H_
#define STOKER_CLIENT_CPP_AWS_PROFILE_H_

#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stoker {

// The environment's lookup (tests inject one); null for unset.
using Getenv = std::function<const char*(const char*)>;

// The variable `name` through `getenv` (null: the process's environment);
// "" for unset.
std::string EnvValue(const Getenv& getenv, const char* name);

// One section of an INI file: lower-cased keys to values.
using IniSection = std::map<std::string, std::string>;

// All the sections of the AWS INI file at `path`.
std::map<std::string, IniSection> ReadAwsIni(const std::string& path);

struct AwsProfile {
  std::string name;              // AWS_PROFILE, else "default".
  std::string credentials_file;  // The paths looked in.
  std::string config_file;
  IniSection in_credentials;     // The profile's section of each file
  IniSection in_config;          // (empty where it has none).

  // `key` from the credentials file, then from the config file; "" if in
  // neither.
  std::string Get(absl::string_view key) const;
  // Whether `key` is set (non-empty) in either file.
  bool Has(absl::string_view key) const { return !Get(key).empty(); }
};

absl::StatusOr<AwsProfile> LoadAwsProfile(const Getenv& getenv = nullptr);

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_AWS_PROFILE_H_
