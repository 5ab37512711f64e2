#include "server/objstore/s3_signing.h"

#include <nettle/hmac.h>
#include <nettle/sha2.h>

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace stoker {
namespace {

constexpr char kAlgorithm[] = "AWS4-HMAC-SHA256";
constexpr char kEmptySha256[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string Hmac(absl::string_view key, absl::string_view data) {
  struct hmac_sha256_ctx ctx;
  hmac_sha256_set_key(&ctx, key.size(), reinterpret_cast<const uint8_t*>(key.data()));
  hmac_sha256_update(&ctx, data.size(), reinterpret_cast<const uint8_t*>(data.data()));
  std::string out(SHA256_DIGEST_SIZE, '\0');
  hmac_sha256_digest(&ctx, out.size(), reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

bool AllOf(absl::string_view s, bool (*ok)(unsigned char)) {
  return std::all_of(s.begin(), s.end(),
                     [ok](char c) { return ok(static_cast<unsigned char>(c)); });
}

// UriEncode's output: what it keeps, and %XX.
bool EncodedChar(unsigned char c) {
  return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '%';
}
bool PathChar(unsigned char c) { return EncodedChar(c) || c == '/'; }
bool QueryChar(unsigned char c) { return EncodedChar(c) || c == '=' || c == '&'; }
bool HostChar(unsigned char c) {
  return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '.' || c == '-' || c == ':' ||
         c == '[' || c == ']';
}
bool AuthorizationChar(unsigned char c) {
  return absl::ascii_isalnum(c) || c == ' ' || c == '-' || c == '/' || c == ',' || c == ';' ||
         c == '=' || c == '_';
}

bool IsAmzDate(absl::string_view d) {
  if (d.size() != 16 || d[8] != 'T' || d[15] != 'Z') return false;
  for (size_t i = 0; i < 15; ++i) {
    if (i != 8 && !absl::ascii_isdigit(static_cast<unsigned char>(d[i]))) return false;
  }
  return true;
}

std::string Scope(absl::string_view amz_date, const SigningKey& key) {
  return absl::StrCat(amz_date.substr(0, 8), "/", key.region, "/s3/aws4_request");
}

std::string SignedHeaders(bool token) {
  return token ? "host;x-amz-content-sha256;x-amz-date;x-amz-security-token"
               : "host;x-amz-content-sha256;x-amz-date";
}

}  // namespace

bool IsKeyIdChar(unsigned char c) { return absl::ascii_isalnum(c); }
bool IsTokenChar(unsigned char c) {
  return absl::ascii_isalnum(c) || c == '+' || c == '/' || c == '=' || c == '-' || c == '_' ||
         c == '.';
}
bool IsRegionChar(unsigned char c) {
  return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-';
}

std::string Sha256Hex(absl::string_view data) {
  struct sha256_ctx ctx;
  sha256_init(&ctx);
  sha256_update(&ctx, data.size(), reinterpret_cast<const uint8_t*>(data.data()));
  std::string digest(SHA256_DIGEST_SIZE, '\0');
  sha256_digest(&ctx, digest.size(), reinterpret_cast<uint8_t*>(digest.data()));
  return absl::BytesToHexString(digest);
}

const char* PayloadHash(absl::string_view method) {
  return method == "PUT" ? "UNSIGNED-PAYLOAD" : kEmptySha256;
}

std::string AmzDate(absl::Time t) {
  return absl::FormatTime("%Y%m%dT%H%M%SZ", t, absl::UTCTimeZone());
}

std::string HostHeader(const Endpoint& e) {
  const std::string host = absl::StrContains(e.host, ':') ? absl::StrCat("[", e.host, "]") : e.host;
  const bool default_port = e.port == (e.tls ? 443 : 80);
  return default_port ? host : absl::StrCat(host, ":", e.port);
}

std::string SignatureOf(absl::string_view canonical_request, absl::string_view amz_date,
                        const SigningKey& key) {
  const std::string to_sign = absl::StrCat(kAlgorithm, "\n", amz_date, "\n", Scope(amz_date, key),
                                           "\n", Sha256Hex(canonical_request));
  std::string k = Hmac(absl::StrCat("AWS4", key.secret_access_key), amz_date.substr(0, 8));
  k = Hmac(k, key.region);
  k = Hmac(k, "s3");
  k = Hmac(k, "aws4_request");
  return absl::BytesToHexString(Hmac(k, to_sign));
}

Signature SignV4(const SigningRequest& r, const SigningKey& key) {
  const bool token = !key.session_token.empty();
  const char* payload = PayloadHash(r.method);
  std::string canonical = absl::StrCat(r.method, "\n", r.path, "\n", r.query, "\n", "host:", r.host,
                                       "\n", "x-amz-content-sha256:", payload, "\n",
                                       "x-amz-date:", r.amz_date, "\n");
  if (token) absl::StrAppend(&canonical, "x-amz-security-token:", key.session_token, "\n");
  absl::StrAppend(&canonical, "\n", SignedHeaders(token), "\n", payload);
  Signature s;
  s.authorization = absl::StrCat(kAlgorithm, " Credential=", key.access_key_id, "/",
                                 Scope(r.amz_date, key), ", SignedHeaders=", SignedHeaders(token),
                                 ", Signature=", SignatureOf(canonical, r.amz_date, key));
  s.session_token = key.session_token;
  return s;
}

std::string SigningRequest::Encode() const {
  return absl::StrCat(method, "\n", host, "\n", path, "\n", query, "\n", amz_date);
}

absl::StatusOr<SigningRequest> SigningRequest::Parse(absl::string_view text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  SigningRequest r;
  if (lines.size() == 5) {
    r = SigningRequest{lines[0], lines[1], lines[2], lines[3], lines[4]};
  }
  if (lines.size() != 5 || (r.method != "GET" && r.method != "HEAD" && r.method != "PUT") ||
      r.host.empty() || r.host.size() > 300 || !AllOf(r.host, HostChar) || r.path.empty() ||
      r.path[0] != '/' || r.path.size() > 4096 || !AllOf(r.path, PathChar) ||
      r.query.size() > 8192 || !AllOf(r.query, QueryChar) || !IsAmzDate(r.amz_date)) {
    return absl::InvalidArgumentError("a malformed request to sign");
  }
  return r;
}

std::string KeyIdOf(const Signature& s) {
  const absl::string_view prefix = "AWS4-HMAC-SHA256 Credential=";
  absl::string_view a = s.authorization;
  if (!absl::StartsWith(a, prefix)) return "";
  a.remove_prefix(prefix.size());
  return std::string(a.substr(0, a.find('/')));
}

std::string Signature::Encode() const { return absl::StrCat(authorization, "\n", session_token); }

absl::StatusOr<Signature> Signature::Parse(absl::string_view text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  Signature s;
  if (lines.size() == 2) s = Signature{lines[0], lines[1]};
  if (lines.size() != 2 || s.authorization.size() > 1024 ||
      !absl::StartsWith(s.authorization, absl::StrCat(kAlgorithm, " Credential=")) ||
      !AllOf(s.authorization, AuthorizationChar) || s.session_token.size() > 4096 ||
      !AllOf(s.session_token, IsTokenChar)) {
    return absl::InvalidArgumentError("a malformed signature");
  }
  return s;
}

}  // namespace stoker
