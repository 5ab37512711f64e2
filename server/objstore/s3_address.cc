#include "server/objstore/s3_address.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace stoker {
namespace {

constexpr size_t kMaxKeyBytes = 1024;  // S3's own limit.

bool Unreserved(unsigned char c) {
  return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

// A host name or address as URLs carry it: letters, digits, '-', '.', or
// a bracketed IPv6 literal.
bool ValidHost(absl::string_view h) {
  if (h.empty() || h.size() > 253) return false;
  return std::all_of(h.begin(), h.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ||
           c == ':';
  });
}

}  // namespace

absl::StatusOr<Endpoint> Endpoint::Parse(absl::string_view url) {
  const std::string shown(url.substr(0, 200));
  Endpoint e;
  absl::string_view rest = url;
  if (absl::ConsumePrefix(&rest, "https://")) {
    e.tls = true;
  } else if (absl::ConsumePrefix(&rest, "http://")) {
    e.tls = false;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("object store endpoint '", shown, "': not an http:// or https:// URL"));
  }
  absl::ConsumeSuffix(&rest, "/");
  if (rest.find_first_of("/?#@") != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "object store endpoint '", shown, "': only scheme, host and port are allowed"));
  }
  absl::string_view host = rest, port;
  if (absl::ConsumePrefix(&rest, "[")) {  // [v6]:port
    const size_t close = rest.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("object store endpoint '", shown, "': unclosed IPv6 literal"));
    }
    host = rest.substr(0, close);
    rest.remove_prefix(close + 1);
    if (!rest.empty() && !absl::ConsumePrefix(&rest, ":")) {
      return absl::InvalidArgumentError(
          absl::StrCat("object store endpoint '", shown, "': junk after the host"));
    }
    port = rest;
  } else {
    const size_t colon = rest.rfind(':');
    if (colon != absl::string_view::npos) {
      host = rest.substr(0, colon);
      port = rest.substr(colon + 1);
      if (host.find(':') != absl::string_view::npos) {
        return absl::InvalidArgumentError(absl::StrCat(
            "object store endpoint '", shown, "': an IPv6 host must be in brackets"));
      }
    }
  }
  if (!ValidHost(host)) {
    return absl::InvalidArgumentError(
        absl::StrCat("object store endpoint '", shown, "': not a host name"));
  }
  e.host = absl::AsciiStrToLower(host);
  e.port = e.tls ? 443 : 80;
  if (!port.empty()) {
    uint32_t p = 0;
    if (!absl::SimpleAtoi(port, &p) || p == 0 || p > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("object store endpoint '", shown, "': bad port"));
    }
    e.port = static_cast<uint16_t>(p);
  }
  return e;
}

std::string Endpoint::ToString() const {
  const bool v6 = host.find(':') != std::string::npos;
  return absl::StrCat(tls ? "https://" : "http://", v6 ? "[" : "", host, v6 ? "]" : "", ":",
                      port);
}

absl::StatusOr<EndpointAllowList> EndpointAllowList::Parse(absl::string_view list) {
  EndpointAllowList out;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    part = absl::StripAsciiWhitespace(part);
    if (part == "aws") {
      out.aws_ = true;
      continue;
    }
    absl::StatusOr<Endpoint> e = Endpoint::Parse(part);
    if (!e.ok()) return e.status();
    out.endpoints_.push_back(*std::move(e));
  }
  return out;
}

namespace {

// One of AWS's S3 endpoints: https on 443, s3.amazonaws.com[.cn] or
// s3[-fips][.dualstack].<region>.amazonaws.com[.cn], a region being a
// lower-case label of letters, digits and '-'.
bool AwsS3Endpoint(const Endpoint& e) {
  if (!e.tls || e.port != 443) return false;
  absl::string_view h = e.host;
  if (!absl::ConsumeSuffix(&h, ".amazonaws.com") && !absl::ConsumeSuffix(&h, ".amazonaws.com.cn"))
    return false;
  if (h == "s3") return true;
  if (!absl::ConsumePrefix(&h, "s3-fips.") && !absl::ConsumePrefix(&h, "s3.")) return false;
  absl::ConsumePrefix(&h, "dualstack.");
  return !h.empty() && h.size() <= 32 && absl::ascii_islower(static_cast<unsigned char>(h[0])) &&
         std::all_of(h.begin(), h.end(), [](char c) {
           return absl::ascii_islower(static_cast<unsigned char>(c)) ||
                  absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '-';
         });
}

}  // namespace

absl::Status EndpointAllowList::Check(const Endpoint& e, bool admin) const {
  if (std::find(endpoints_.begin(), endpoints_.end(), e) != endpoints_.end() ||
      (aws_ && AwsS3Endpoint(e)) || (admins_ && admin)) {
    return absl::OkStatus();
  }
  std::string listed;
  for (const Endpoint& x : endpoints_) absl::StrAppend(&listed, listed.empty() ? "" : ", ",
                                                       x.ToString());
  if (aws_) absl::StrAppend(&listed, listed.empty() ? "" : ", ", "aws");
  return absl::PermissionDeniedError(absl::StrCat(
      "object store endpoint ", e.ToString(),
      " is not one this daemon may reach (its --object-store-endpoints: ",
      listed.empty() ? "none" : listed, ")"));
}

bool IsS3Url(absl::string_view s) { return absl::StartsWith(s, "s3://"); }

absl::StatusOr<S3Url> S3Url::Parse(absl::string_view url) {
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "s3://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", url.substr(0, 200), "' is not an s3://bucket/key name"));
  }
  S3Url out;
  const size_t slash = rest.find('/');
  out.bucket = std::string(rest.substr(0, slash));
  if (slash != absl::string_view::npos) out.key = std::string(rest.substr(slash + 1));
  const std::string& b = out.bucket;
  const bool chars_ok = std::all_of(b.begin(), b.end(), [](char c) {
    return absl::ascii_islower(static_cast<unsigned char>(c)) ||
           absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-';
  });
  if (b.size() < 3 || b.size() > 63 || !chars_ok || !absl::ascii_isalnum(b.front()) ||
      !absl::ascii_isalnum(b.back()) || absl::StrContains(b, "..")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", url.substr(0, 200),
        "': the bucket name must be 3 to 63 lower-case letters, digits, '.' and '-'"));
  }
  if (out.key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", url.substr(0, 200), "...': an object key is at most ", kMaxKeyBytes, " bytes"));
  }
  return out;
}

std::string UriEncode(absl::string_view s, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (Unreserved(c) || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string ObjectPath(absl::string_view bucket, absl::string_view key) {
  if (key.empty()) return absl::StrCat("/", UriEncode(bucket, false));
  return absl::StrCat("/", UriEncode(bucket, false), "/", UriEncode(key, true));
}

std::string CanonicalQuery(std::vector<std::pair<std::string, std::string>> params) {
  for (auto& [name, value] : params) {
    name = UriEncode(name, false);
    value = UriEncode(value, false);
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (const auto& [name, value] : params) {
    absl::StrAppend(&out, out.empty() ? "" : "&", name, "=", value);
  }
  return out;
}

}  // namespace stoker
