#include "client/cpp/session_signer.h"

#include <unistd.h>

#include <cstdio>
#include <map>
#include <utility>
#include <vector>

#include "absl/base/const_init.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/civil_time.h"
#include "server/objstore/s3_address.h"
#include "shm/fd_passing.h"

namespace stoker {
namespace {

// %XX decoded; false for a malformed escape (UriEncode's output has none).
bool UriDecode(absl::string_view s, std::string* out) {
  out->clear();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out->push_back(s[i]);
      continue;
    }
    int v = 0;
    if (i + 2 >= s.size() || !absl::ascii_isxdigit(static_cast<unsigned char>(s[i + 1])) ||
        !absl::ascii_isxdigit(static_cast<unsigned char>(s[i + 2])) ||
        !absl::SimpleHexAtoi(s.substr(i + 1, 2), &v)) {
      return false;
    }
    out->push_back(static_cast<char>(v));
    i += 2;
  }
  return true;
}

// The key part of `path` for `bucket` ("/bucket/key" -> "key"), decoded;
// false when the path is not of that bucket.
bool KeyOf(absl::string_view path, const std::string& bucket, std::string* key) {
  const std::string head = absl::StrCat("/", bucket, "/");
  if (!absl::StartsWith(path, head)) return false;
  return UriDecode(path.substr(head.size()), key);
}

// Writes `s` to this process's stderr unless it was the last written.
void ReportOnce(const absl::Status& s) {
  static absl::Mutex mu(absl::kConstInit);
  static std::string* last = new std::string;
  const std::string line = absl::StrCat("stoker: object store credentials: ", s.message());
  {
    absl::MutexLock lock(&mu);
    if (*last == line) return;
    *last = line;
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

bool HasDotSegment(absl::string_view key) {
  for (absl::string_view part : absl::StrSplit(key, '/')) {
    if (part == "." || part == "..") return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SessionSigner>> SessionSigner::Create(
    const v1::S3Source& source, const std::string& endpoint, const std::string& region,
    Credentials credentials, std::function<absl::Time()> now) {
  std::unique_ptr<SessionSigner> s(new SessionSigner());
  absl::StatusOr<Endpoint> e = Endpoint::Parse(endpoint);
  if (!e.ok()) return e.status();
  absl::StatusOr<S3Url> url = S3Url::Parse(source.url());
  if (!url.ok()) return url.status();
  s->host_ = HostHeader(*e);
  s->region_ = region;
  const std::string& key = url->key;
  if (const size_t brace = key.find('{'); brace != std::string::npos) {
    // A pattern: the keys of its folder.
    const size_t slash = key.rfind('/', brace);
    s->reach_.push_back(
        Reach{url->bucket, slash == std::string::npos ? "" : key.substr(0, slash + 1), true});
  } else if (key.empty() || key.back() == '/') {
    s->reach_.push_back(Reach{url->bucket, key, true});
  } else {
    s->reach_.push_back(Reach{url->bucket, key, false});
    s->reach_.push_back(Reach{url->bucket, key + "/", true});
  }
  if (IsS3Url(source.manifest())) {
    absl::StatusOr<S3Url> manifest = S3Url::Parse(source.manifest());
    if (!manifest.ok()) return manifest.status();
    s->reach_.push_back(Reach{manifest->bucket, manifest->key, false});
  }
  s->credentials_ = std::move(credentials);
  s->now_ = now ? std::move(now) : [] { return absl::Now(); };
  return s;
}

bool SessionSigner::Reaches(const std::string& bucket, const std::string& key,
                            bool listing) const {
  if (HasDotSegment(key)) return false;
  for (const Reach& r : reach_) {
    if (r.bucket != bucket) continue;
    if (r.prefix ? absl::StartsWith(key, r.key) : (!listing && key == r.key)) return true;
  }
  return false;
}

std::string SessionSigner::Described() const {
  return absl::StrJoin(reach_, ", ", [](std::string* out, const Reach& r) {
    absl::StrAppend(out, "s3://", r.bucket, "/", r.key, r.prefix ? "*" : "");
  });
}

absl::StatusOr<std::string> SessionSigner::Sign(const std::string& text) const {
  absl::StatusOr<SigningRequest> r = SigningRequest::Parse(text);
  if (!r.ok()) return r.status();
  auto refuse = [&](absl::string_view why) {
    return absl::PermissionDeniedError(
        absl::StrCat("the session's client signs no ", r->method, " of ", r->host, r->path,
                     r->query.empty() ? "" : "?", r->query, " (", why,
                     "); this session reaches ", Described(), " at ", host_));
  };
  if (r->method != "GET" && r->method != "HEAD") return refuse("it signs only GET and HEAD");
  if (r->host != host_) return refuse("another endpoint");
  // SigningRequest::Parse checked its form: YYYYMMDDTHHMMSSZ.
  const absl::string_view d = r->amz_date;
  auto num = [&d](size_t at, size_t n) {
    int v = 0;
    return absl::SimpleAtoi(d.substr(at, n), &v) ? v : -1;
  };
  const absl::Time date = absl::FromCivil(
      absl::CivilSecond(num(0, 4), num(4, 2), num(6, 2), num(9, 2), num(11, 2), num(13, 2)),
      absl::UTCTimeZone());
  if (AmzDate(date) != r->amz_date || absl::AbsDuration(date - now_()) > absl::Minutes(5)) {
    return refuse("its date is not now");
  }
  bool within = false;
  std::string key;
  for (const Reach& reach : reach_) {
    if (r->query.empty() && KeyOf(r->path, reach.bucket, &key)) {
      within = Reaches(reach.bucket, key, false);
    } else if (r->method == "GET" && r->path == absl::StrCat("/", reach.bucket)) {
      // A listing: ListObjectsV2 of a prefix within reach, nothing else;
      // each parameter once (a store may read the first of two, the
      // signature cover both), and the query exactly as CanonicalQuery
      // writes it.
      std::map<std::string, std::string> params;
      bool well_formed = true;
      for (absl::string_view param : absl::StrSplit(r->query, '&')) {
        std::pair<std::string, std::string> nv = absl::StrSplit(param, absl::MaxSplits('=', 1));
        std::string value;
        well_formed = well_formed && UriDecode(nv.second, &value) &&
                      params.emplace(nv.first, std::move(value)).second;
      }
      std::vector<std::pair<std::string, std::string>> pairs(params.begin(), params.end());
      well_formed = well_formed && CanonicalQuery(pairs) == r->query;
      for (const auto& [name, value] : params) {
        well_formed = well_formed && (name == "list-type" || name == "prefix" ||
                                      name == "delimiter" || name == "continuation-token" ||
                                      name == "max-keys");
      }
      within = well_formed && params.count("list-type") && params["list-type"] == "2" &&
               params.count("prefix") && Reaches(reach.bucket, params["prefix"], true);
    }
    if (within) break;
  }
  if (!within) return refuse("outside the session's dataset");
  absl::StatusOr<SigningKey> key_now = credentials_();
  if (!key_now.ok()) {
    // Its words (a command line, a helper's stderr) stay on the trainer's
    // side, once each: the daemon, and its log, get only that it failed.
    ReportOnce(key_now.status());
    return absl::Status(key_now.status().code(),
                        "the trainer's credentials could not be had; the trainer's stderr says "
                        "why (stoker: object store credentials ...)");
  }
  key_now->region = region_;
  return SignV4(*r, *key_now).Encode();
}

absl::StatusOr<std::unique_ptr<shm::OpenServer>> ServeSessionSigner(
    const std::string& ring_socket, const v1::S3Source& source, v1::ObjectStoreAccess* access,
    std::shared_ptr<CredentialSource> credentials) {
  absl::StatusOr<std::unique_ptr<SessionSigner>> made = SessionSigner::Create(
      source, access->endpoint(), access->region(),
      [credentials]() -> absl::StatusOr<SigningKey> {
        absl::StatusOr<AwsCredentials> c = credentials->Get();
        if (!c.ok()) return c.status();
        return SigningKey{c->access_key_id, c->secret_access_key, c->session_token, ""};
      });
  if (!made.ok()) return made.status();
  std::shared_ptr<const SessionSigner> signer = *std::move(made);
  absl::StatusOr<shm::ServedSigner> served = shm::ServeSigner(
      [signer](const std::string& request) { return signer->Sign(request); });
  if (!served.ok()) return served.status();
  absl::StatusOr<std::string> token = shm::HandOverSigner(ring_socket, served->channel_fd);
  close(served->channel_fd);
  if (!token.ok()) return token.status();
  access->set_signer_token(*token);
  return std::move(served->server);
}

}  // namespace stoker
