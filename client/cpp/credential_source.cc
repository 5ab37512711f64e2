#include "client/cpp/credential_source.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "client/cpp/aws_profile.h"
#include "client/cpp/http_credentials.h"
#include "client/cpp/process_credentials.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "util/status_macros.h"

namespace stoker {
namespace {

using google::protobuf::Value;

constexpr absl::Duration kMaxRefreshLead = absl::Minutes(5);

std::shared_ptr<CredentialSource> StaticKeys(const IniSection& section, std::string description) {
  auto get = [&](const char* key) {
    auto it = section.find(key);
    return it == section.end() ? std::string() : it->second;
  };
  AwsCredentials c{get("aws_access_key_id"), get("aws_secret_access_key"),
                   get("aws_session_token")};
  if (c.access_key_id.empty() || c.secret_access_key.empty()) return nullptr;
  return std::make_shared<StaticCredentialSource>(std::move(c), std::move(description));
}

// FAILED_PRECONDITION where the profile's credentials need AWS STS or SSO
// over HTTPS (and it has no credential_process to get them with).
absl::Status RefuseHttpsOnly(const AwsProfile& profile, const Getenv& getenv) {
  std::string what;
  if (!EnvValue(getenv, "AWS_WEB_IDENTITY_TOKEN_FILE").empty() &&
      !EnvValue(getenv, "AWS_ROLE_ARN").empty()) {
    what = "web identity (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN)";
  } else if (profile.Has("web_identity_token_file")) {
    what = "web identity (web_identity_token_file)";
  } else if (profile.Has("role_arn")) {
    what = "an assumed role (role_arn)";
  } else if (profile.Has("sso_session") || profile.Has("sso_start_url")) {
    what = "IAM Identity Center (sso_session or sso_start_url)";
  } else {
    return absl::OkStatus();
  }
  const std::string section = profile.name == "default" ? "[default]"
                                                        : "[profile " + profile.name + "]";
  return absl::FailedPreconditionError(absl::StrCat(
      "AWS profile ", profile.name, " gets its credentials from ", what,
      ", which needs HTTPS to AWS that the Stoker client does not speak; add `credential_process "
      "= aws configure export-credentials --profile ",
      profile.name, " --format process` (AWS CLI v2) to ", section, " in ", profile.config_file));
}

}  // namespace

absl::Status Prefixed(absl::string_view what, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

absl::StatusOr<absl::Time> ParseIso8601(absl::string_view text) {
  absl::Time t;
  std::string err;
  for (const char* format : {absl::RFC3339_full, "%Y-%m-%d%ET%H:%M:%E*S"}) {
    if (absl::ParseTime(format, text, absl::UTCTimeZone(), &t, &err)) return t;
  }
  return absl::InvalidArgumentError(absl::StrCat("`", text, "` is not an ISO 8601 time"));
}

absl::StatusOr<AwsCredentials> CredentialsFromJson(absl::string_view json,
                                                   absl::string_view token_member,
                                                   bool version_required) {
  google::protobuf::Struct object;
  // The parser's own message would quote the text around a fault.
  if (!google::protobuf::util::JsonStringToMessage(std::string(json), &object).ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("its answer (", json.size(), " bytes) is not a JSON object"));
  }
  const auto& fields = object.fields();
  auto member = [&](absl::string_view name) -> const Value* {
    auto it = fields.find(std::string(name));
    return it == fields.end() ? nullptr : &it->second;
  };
  auto text = [&](absl::string_view name) -> absl::StatusOr<std::string> {
    const Value* v = member(name);
    if (v == nullptr || v->kind_case() == Value::kNullValue) return std::string();
    if (v->kind_case() != Value::kStringValue) {
      return absl::FailedPreconditionError(absl::StrCat("its ", name, " is not a string"));
    }
    return v->string_value();
  };
  if (const Value* v = member("Version"); v != nullptr || version_required) {
    if (v == nullptr || v->kind_case() != Value::kNumberValue || v->number_value() != 1) {
      return absl::FailedPreconditionError(
          "its answer's Version is not 1 (the one version of credential_process's answer)");
    }
  }
  STOKER_ASSIGN_OR_RETURN(const std::string code, text("Code"));
  if (!code.empty() && code != "Success") {
    return absl::FailedPreconditionError(absl::StrCat("it answered Code `", code, "`"));
  }
  AwsCredentials c;
  STOKER_ASSIGN_OR_RETURN(c.access_key_id, text("AccessKeyId"));
  STOKER_ASSIGN_OR_RETURN(c.secret_access_key, text("SecretAccessKey"));
  STOKER_ASSIGN_OR_RETURN(c.session_token, text(token_member));
  if (c.access_key_id.empty() || c.secret_access_key.empty()) {
    return absl::FailedPreconditionError("its answer lacks AccessKeyId or SecretAccessKey");
  }
  STOKER_ASSIGN_OR_RETURN(const std::string expiration, text("Expiration"));
  if (!expiration.empty()) {
    absl::StatusOr<absl::Time> t = ParseIso8601(expiration);
    if (!t.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("its Expiration ", t.status().message()));
    }
    c.expiration = *t;
  }
  return c;
}

RefreshingSource::RefreshingSource(Clock clock) : clock_(std::move(clock)) {}

absl::Time RefreshingSource::Now() const { return clock_ ? clock_() : absl::Now(); }

absl::Duration RefreshingSource::RefreshLead(absl::Duration lifetime) {
  return std::min(kMaxRefreshLead, lifetime / 2);
}

absl::StatusOr<AwsCredentials> RefreshingSource::Get() {
  absl::MutexLock lock(&mu_);
  for (;;) {
    const absl::Time now = Now();
    const bool valid = have_ && now < current_.expiration;
    if (valid && (now < refresh_at_ || fetching_ || now < retry_at_)) return current_;
    // Gone, and the last fetch failed a moment ago: its error, not a
    // fetch for every request meanwhile.
    if (!valid && !fetching_ && now < retry_at_ && !last_error_.ok()) return last_error_;
    if (fetching_) {  // They are gone: wait for the fetch under way.
      const uint64_t seen = fetches_;
      auto ended = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return fetches_ != seen; };
      mu_.Await(absl::Condition(&ended));
      if (have_ && Now() < current_.expiration) return current_;
      if (!last_error_.ok()) return last_error_;
      continue;
    }
    fetching_ = true;
    mu_.Unlock();
    absl::StatusOr<AwsCredentials> fetched = Fetch();
    mu_.Lock();
    fetching_ = false;
    ++fetches_;
    const absl::Time at = Now();
    if (fetched.ok() && fetched->expiration <= at) {
      fetched = absl::UnavailableError(absl::StrCat(
          description(), ": the credentials it gave expired at ",
          absl::FormatTime(absl::RFC3339_sec, fetched->expiration, absl::UTCTimeZone())));
    }
    if (fetched.ok()) {
      current_ = *std::move(fetched);
      have_ = true;
      refresh_at_ = current_.expiration - RefreshLead(current_.expiration - at);
      last_error_ = absl::OkStatus();
      return current_;
    }
    last_error_ = fetched.status();
    retry_at_ = at + kRetryAfterFailure;
    if (have_ && at < current_.expiration) return current_;
    return last_error_;
  }
}

absl::StatusOr<std::shared_ptr<CredentialSource>> CredentialsFromEnvironment(
    const std::function<const char*(const char*)>& getenv, const CredentialOptions& options) {
  STOKER_ASSIGN_OR_RETURN(const AwsProfile profile, LoadAwsProfile(getenv));
  return CredentialsFromProfile(profile, getenv, options);
}

absl::StatusOr<std::shared_ptr<CredentialSource>> CredentialsFromProfile(
    const AwsProfile& profile, const std::function<const char*(const char*)>& getenv,
    const CredentialOptions& options) {
  auto env = [&](const char* name) { return EnvValue(getenv, name); };
  if (!env("AWS_ACCESS_KEY_ID").empty() && !env("AWS_SECRET_ACCESS_KEY").empty()) {
    return std::shared_ptr<CredentialSource>(std::make_shared<StaticCredentialSource>(
        AwsCredentials{env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"),
                       env("AWS_SESSION_TOKEN")},
        "environment"));
  }
  const std::string process = profile.Get("credential_process");
  if (process.empty()) STOKER_RETURN_IF_ERROR(RefuseHttpsOnly(profile, getenv));
  const std::string name = "profile " + profile.name;
  if (auto keys = StaticKeys(profile.in_credentials, name + " (credentials file)")) return keys;
  if (!process.empty()) {
    STOKER_ASSIGN_OR_RETURN(std::shared_ptr<CredentialSource> source,
                            ProcessCredentialSource::Create(profile.name, process, options.clock,
                                                            options.process_timeout));
    return source;
  }
  if (auto keys = StaticKeys(profile.in_config, name + " (config file)")) return keys;
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<CredentialSource> container,
                          ContainerCredentialSource::FromEnvironment(getenv, options.clock));
  if (container != nullptr) return container;
  // Tried last and only if it answers at once, as the SDKs do: elsewhere
  // than on EC2 it is not there.
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<CredentialSource> instance,
                          InstanceMetadataSource::FromEnvironment(getenv, options.clock));
  if (instance != nullptr && instance->Get().ok()) return instance;
  return std::shared_ptr<CredentialSource>();
}

}  // namespace stoker
