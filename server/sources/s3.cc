#include "server/sources/s3.h"

#include <algorithm>
#include <climits>
#include <atomic>
#include <memory>
#include <thread>
#include <unordered_map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "proto/kept.pb.h"
#include "server/dataset/sample_source.h"
#include "server/sources/folder.h"
#include "server/sources/s3_lister.h"
#include "server/sources/s3_manifest.h"
#include "server/sources/s3_objects.h"
#include "server/sources/s3_shards.h"
#include "server/sources/source.h"
#include "util/cache_key.h"
#include "util/log.h"

namespace stoker {
namespace {

constexpr int kListingsAtOnce = 16;
// The largest listing kept (about a million objects), and how long.
constexpr size_t kMostKeptBytes = size_t{128} << 20;
constexpr absl::Duration kKeptFor = absl::Hours(24);

// Lists `root` (a prefix ending in '/') as an ImageFolder: the classes by
// one delimited listing, then each class in parallel, each page charged as
// it comes (the sample and its listed identity: twice over).
// With no class prefixes but .tar objects, those are *shards and the
// listing has no classes.
absl::StatusOr<kept::S3Listing> ListFolder(const S3Url& root, const ObjectStoreAccess& access,
                                           S3Client* client, const ScanLimits& limits,
                                           ListCharge* charge,
                                           std::vector<ListedObject>* shards) {
  Lister lister(root, access, client, limits);
  std::vector<std::string> classes;
  uint64_t skipped = 0;
  absl::Status s = lister.Walk(root.key, "/", [&](ListPage& p) {
    for (std::string& c : p.prefixes) classes.push_back(std::move(c));
    skipped += p.objects.size();
    for (ListedObject& o : p.objects) {
      if (IsShardKey(o.key)) shards->push_back(std::move(o));
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  std::sort(classes.begin(), classes.end());
  if (classes.empty() && !shards->empty()) return kept::S3Listing();  // Shards, no classes.
  if (classes.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        root.ToString(), " has no class prefixes (an ImageFolder is <prefix>/<class>/<image>) "
                         "and no .tar shards"));
  }
  absl::Mutex charge_mu;
  std::vector<std::vector<ListedObject>> found(classes.size());
  std::vector<absl::Status> errors(classes.size());
  std::atomic<size_t> next{0};
  RunOnThreads(std::min<int>(kListingsAtOnce, classes.size()), [&] {
    for (size_t c; (c = next.fetch_add(1)) < classes.size();) {
      errors[c] = lister.Walk(classes[c], "", [&](ListPage& p) {
        for (ListedObject& o : p.objects) {
          if (!HasImageExtension(o.key)) continue;
          {
            absl::MutexLock lock(&charge_mu);
            const Sample as_charged{o.key, 0, {o.etag}};
            if (absl::Status cs = charge->Add(as_charged); !cs.ok()) return cs;
            if (absl::Status cs = charge->Add(as_charged); !cs.ok()) return cs;
          }
          found[c].push_back(std::move(o));
        }
        return absl::OkStatus();
      });
      if (!errors[c].ok()) next.store(classes.size());  // The first error ends it.
    }
  });
  for (const absl::Status& e : errors) {
    if (!e.ok()) return e;
  }
  kept::S3Listing listing;
  listing.set_listed_unix_seconds(absl::ToUnixSeconds(absl::Now()));
  listing.set_skipped(skipped);
  for (size_t c = 0; c < classes.size(); ++c) {
    std::sort(found[c].begin(), found[c].end(),
              [](const ListedObject& a, const ListedObject& b) { return a.key < b.key; });
    listing.add_class_names(std::string(absl::StripSuffix(classes[c].substr(root.key.size()), "/")));
    for (ListedObject& o : found[c]) {
      kept::S3Listing::Object* k = listing.add_objects();
      k->set_key(std::move(o.key));
      k->set_size(o.size);
      k->set_etag(std::move(o.etag));
      k->set_label(static_cast<uint32_t>(c));
    }
    std::vector<ListedObject>().swap(found[c]);
  }
  return listing;
}

// Whether a kept listing is one of `root` this daemon could have written
// (it reads it back from its own L2: a check, not a trust boundary), within
// the limits; each object charged as a listed one is.
bool TakeKept(const S3Url& root, const kept::S3Listing& l, const ScanLimits& limits,
              ListCharge* charge) {
  const uint64_t seen = uint64_t(l.objects_size()) + l.class_names_size() + l.skipped();
  if (l.class_names_size() == 0 || l.objects_size() == 0 || seen > limits.max_files) {
    return false;
  }
  for (const kept::S3Listing::Object& o : l.objects()) {
    if (o.label() >= static_cast<uint32_t>(l.class_names_size()) ||
        !absl::StartsWith(o.key(), root.key) || o.etag().empty()) {
      return false;
    }
    const Sample as_charged{o.key(), 0, {o.etag()}};
    if (!charge->Add(as_charged).ok() || !charge->Add(as_charged).ok()) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<Dataset> OpenS3Folder(const S3Url& url, const ObjectStoreAccess& access,
                                     S3Client* client, const ScanLimits& limits,
                                     const KeptListing& keep, const ReadAhead& ahead) {
  S3Url root = url;
  if (!root.key.empty() && root.key.back() != '/') root.key += '/';
  // Per principal: what one key id's owner may list (an IAM prefix
  // condition, another tenant's bucket of the same name) is never taken by
  // another. The key id names the principal; it is not a secret.
  const std::string kept_key =
      CacheKey({"s3-listing", access.endpoint.ToString(), root.bucket, root.key,
                access.credentials != nullptr ? access.credentials->access_key_id : ""});
  ListCharge charge(limits);
  kept::S3Listing listing;
  bool taken = false;
  if (keep.values != nullptr && !keep.refresh && access.credentials != nullptr) {
    bool parsed = false;
    // The value is charged before it is parsed, until what the parse holds
    // has been charged sample by sample (TakeKept).
    std::shared_ptr<void> held;
    keep.values->Get(kept_key, [&](absl::string_view value) {
      held = limits.charge_list ? limits.charge_list(value.size()) : std::make_shared<int>(0);
      parsed = held != nullptr && value.size() <= INT_MAX &&
               listing.ParseFromArray(value.data(), static_cast<int>(value.size()));
    });
    const bool fits =
        parsed && absl::FromUnixSeconds(listing.listed_unix_seconds()) + kKeptFor > absl::Now() &&
        TakeKept(root, listing, limits, &charge);
    held.reset();
    if (fits) {
      // The caller's own proof, at this moment, that it may list the
      // prefix: one request.
      absl::StatusOr<ListPage> proof = client->List(access.endpoint, root.bucket, root.key, "/",
                                                    "", access.credentials, 1, access.owner);
      if (!proof.ok()) return proof.status();
      taken = true;
    } else {
      charge = ListCharge(limits);  // Nothing of a refused one stays charged.
      listing.Clear();
    }
  }
  if (!taken) {
    std::vector<ListedObject> shards;
    absl::StatusOr<kept::S3Listing> listed =
        ListFolder(root, access, client, limits, &charge, &shards);
    if (!listed.ok()) return listed.status();
    if (listed->class_names_size() == 0) {  // A prefix of shards, listed now.
      return OpenS3Shards(root, {}, access, client, limits, keep, ahead, &shards);
    }
    listing = *std::move(listed);
  }
  const std::string listed_at =
      absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                       absl::FromUnixSeconds(listing.listed_unix_seconds()), absl::UTCTimeZone());
  // Kept once it is known good, if it is not too large to keep.
  std::string to_keep;
  if (!taken && keep.values != nullptr && listing.objects_size() > 0 &&
      listing.ByteSizeLong() <= kMostKeptBytes) {
    to_keep = listing.SerializeAsString();
  }
  Dataset ds;
  // With the endpoint: the same bucket elsewhere is other content.
  // (Not when it was listed: a kept listing and a new one of the same
  // objects are one content for the pixel claims.)
  ds.description = absl::StrCat("s3:", root.ToString(), " at ", access.endpoint.ToString());
  for (std::string& c : *listing.mutable_class_names()) ds.class_names.push_back(std::move(c));
  ListedObjects listed;
  listed.reserve(listing.objects_size());
  for (kept::S3Listing::Object& o : *listing.mutable_objects()) {
    Sample sample{absl::StrCat("s3://", root.bucket, "/", o.key()),
                  static_cast<int32_t>(o.label()), {}};
    listed[sample.path] = ListedObjectVersion{o.size(), std::move(*o.mutable_etag()),
                                              ds.samples.size()};
    ds.samples.push_back(std::move(sample));
  }
  ds.skipped_files = listing.skipped();
  ds.num_classes = static_cast<uint32_t>(ds.class_names.size());
  if (ds.samples.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(root.ToString(), " holds no .jpg, .jpeg or .png objects under its classes"));
  }
  if (absl::Status cs = charge.Finish(&ds); !cs.ok()) return cs;
  ds.source = MakeS3Objects(client, access, root.bucket, limits.max_file_bytes,
                            std::move(listed), taken ? listed_at : "");
  if (taken) {
    LogInfo(absl::StrCat(root.ToString(), ": the listing kept from ", listed_at,
                         " (refresh lists it again)"));
  }
  if (!to_keep.empty()) keep.values->Put(kept_key, std::move(to_keep), access.owner);
  return ds;
}

namespace {

class S3Kind : public SourceKind {
 public:
  v1::DatasetSpec::SourceCase source_case() const override { return v1::DatasetSpec::kS3; }
  absl::StatusOr<Dataset> Open(const v1::DatasetSpec& spec,
                               const SourceContext& ctx) const override {
    absl::StatusOr<S3Url> url = S3Url::Parse(spec.s3().url());
    if (!url.ok()) return url.status();
    if (ctx.objects == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          url->ToString(), ": this daemon reaches no object store (its operator lists the "
                           "endpoints it may reach with --object-store-endpoints)"));
    }
    if (ctx.access == nullptr || ctx.access->credentials == nullptr) {
      return absl::UnauthenticatedError(absl::StrCat(
          url->ToString(), ": the session brought no object store credentials (set "
                           "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, where "
                           "the trainer runs)"));
    }
    ObjectStoreAccess access = *ctx.access;
    access.owner = ctx.uid;  // Its requests take turns with other users'.
    const KeptListing keep{ctx.kept, spec.s3().refresh()};
    // Shards by pattern: in the spec, or ending the URL.
    std::string pattern = spec.s3().shards();
    const size_t slash = url->key.rfind('/');
    if (pattern.empty() && url->key.find('{', slash == std::string::npos ? 0 : slash) !=
                               std::string::npos) {
      pattern = url->key.substr(slash == std::string::npos ? 0 : slash + 1);
      url->key.resize(slash == std::string::npos ? 0 : slash + 1);
    }
    if (!spec.s3().manifest().empty()) {
      if (!pattern.empty() || IsShardKey(url->key)) {
        return absl::InvalidArgumentError(absl::StrCat(
            url->ToString(), pattern, ": a manifest names the samples below a prefix, not "
            "with shards named too (a pattern, a .tar URL)"));
      }
      return OpenS3Manifest(*url, spec.s3().manifest(), access, ctx.objects, ctx.limits, keep,
                            ctx.read_ahead);
    }
    if (!pattern.empty() || IsShardKey(url->key)) {
      return OpenS3Shards(*url, {pattern}, access, ctx.objects, ctx.limits, keep, ctx.read_ahead);
    }
    return OpenS3Folder(*url, access, ctx.objects, ctx.limits, keep, ctx.read_ahead);
  }
};

}  // namespace

STOKER_DEFINE_SOURCE(S3SourceKind, S3Kind)

}  // namespace stoker
