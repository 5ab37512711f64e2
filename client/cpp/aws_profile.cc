#include "client/cpp/aws_profile.h"

#include <cstdlib>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace stoker {

std::string EnvValue(const Getenv& getenv_fn, const char* name) {
  const char* v = getenv_fn ? getenv_fn(name) : std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::map<std::string, IniSection> ReadAwsIni(const std::string& path) {
  std::map<std::string, IniSection> out;
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

std::string AwsProfile::Get(absl::string_view key) const {
  for (const IniSection* s : {&in_credentials, &in_config}) {
    auto it = s->find(std::string(key));
    if (it != s->end() && !it->second.empty()) return it->second;
  }
  return "";
}

absl::StatusOr<AwsProfile> LoadAwsProfile(const Getenv& getenv_fn) {
  auto env = [&](const char* name) { return EnvValue(getenv_fn, name); };
  const std::string home = env("HOME");
  AwsProfile p;
  p.name = env("AWS_PROFILE").empty() ? "default" : env("AWS_PROFILE");
  p.credentials_file = !env("AWS_SHARED_CREDENTIALS_FILE").empty()
                           ? env("AWS_SHARED_CREDENTIALS_FILE")
                           : home + "/.aws/credentials";
  p.config_file =
      !env("AWS_CONFIG_FILE").empty() ? env("AWS_CONFIG_FILE") : home + "/.aws/config";
  std::map<std::string, IniSection> creds = ReadAwsIni(p.credentials_file);
  std::map<std::string, IniSection> config = ReadAwsIni(p.config_file);
  const std::string config_section = p.name == "default" ? p.name : "profile " + p.name;
  const bool found = creds.count(p.name) > 0 || config.count(config_section) > 0;
  if (!env("AWS_PROFILE").empty() && !found) {
    return absl::NotFoundError(absl::StrCat("AWS_PROFILE ", p.name, ": no such profile in ",
                                            p.credentials_file, " or ", p.config_file));
  }
  p.in_credentials = std::move(creds[p.name]);
  p.in_config = std::move(config[config_section]);
  return p;
}

}  // namespace stoker
