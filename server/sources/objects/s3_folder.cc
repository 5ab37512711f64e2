#include "server/sources/objects/s3_folder.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "proto/kept.pb.h"
#include "server/dataset/dataset_growth.h"
#include "server/sources/files/folder.h"
#include "server/sources/objects/s3_lister.h"
#include "server/sources/objects/s3_objects.h"
#include "server/sources/objects/s3_shards.h"
#include "util/cache_key.h"
#include "util/log.h"
#include "util/status_macros.h"

namespace stoker {
namespace {

// Classes listed at once: one per 8 classes (so that a window takes about
// 8 round trips), at least 16 (4 for a streamed opening's later windows,
// listed while the first are served: the store serves their reads too),
// at most 64.
int ListingsAtOnce(size_t classes, bool later) {
  return static_cast<int>(std::clamp<size_t>((classes + 7) / 8, later ? 4 : 16, 64));
}
// The largest listing kept (about a million objects), and how long.
constexpr size_t kMostKeptBytes = size_t{128} << 20;
constexpr absl::Duration kKeptFor = absl::Hours(24);

// One class: its images as listed so far, in the store's key order.
struct ClassListing {
  std::string name;
  std::string prefix;  // The root's key, the name and '/'.
  std::vector<ListedObject> images;
  std::string token;  // The next page's.
  bool ended = false;
};

// Charges an image of the listing to the caller: its sample and its
// listed identity (the object's key and ETag), so twice over.
absl::Status ChargeImage(const std::string& key, const std::string& etag, ListCharge* charge) {
  const Sample as_charged{key, 0, {etag}};
  STOKER_RETURN_IF_ERROR(charge->Add(as_charged));
  return charge->Add(as_charged);
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
  uint32_t label = 0;
  for (const kept::S3Listing::Object& o : l.objects()) {
    // Class by class, as a listing is kept.
    if (o.label() < label || o.label() >= static_cast<uint32_t>(l.class_names_size()) ||
        !absl::StartsWith(o.key(), root.key) || o.etag().empty()) {
      return false;
    }
    label = o.label();
    if (!ChargeImage(o.key(), o.etag(), charge).ok()) return false;
  }
  return true;
}

// One opening's classes, listed (or taken whole from a kept listing) and
// numbered window by window into `growth` (s3_folder.h). Owns all it
// uses: a streamed opening runs on after OpenS3Folder returned.
class FolderListing {
 public:
  // `charge` holds what was charged already (a kept listing's objects);
  // `keep` where a listing made now is kept, under `kept_key`.
  // `before`: the listing of the classes, if it was listed now.
  FolderListing(const S3Url& root, const ObjectStoreAccess& access, ObjectStore* client,
                const ScanLimits& limits, const Lister* before,
                std::vector<ClassListing> classes, uint64_t skipped,
                ListCharge charge, const KeptListing& keep, std::string kept_key,
                std::shared_ptr<S3Objects> objects, std::shared_ptr<DatasetGrowth> growth)
      : root_(root),
        access_(access),
        limits_(limits),
        lister_(before != nullptr ? Lister(root_, access_, client, limits_, *before)
                                  : Lister(root_, access_, client, limits_)),
        classes_(std::move(classes)),
        skipped_(skipped),
        charge_(std::move(charge)),
        keep_(keep),
        kept_key_(std::move(kept_key)),
        objects_(std::move(objects)),
        growth_(std::move(growth)) {}

  // Not streamed: lists what is not listed yet and numbers all of it into
  // `ds` (its samples, windows and charges).
  absl::Status Run(Dataset* ds) {
    absl::Status s = ListUntil(UINT64_MAX, 0);
    if (s.ok()) s = AppendWindow(0);
    if (s.ok()) s = AppendWindow(1);
    return Finish(s, ds);
  }

  // Streamed: lists and publishes window 0, its classes' first keys
  // first; false when that was all (`ds` then has it, as from Run).
  absl::StatusOr<bool> First(Dataset* ds) {
    absl::Status s = ListUntil(kFolderFirstWindowPerClass, kFolderFirstWindowPerClass);
    if (s.ok()) s = AppendWindow(0);
    if (s.ok() && !AllListed()) return true;
    if (s.ok()) s = AppendWindow(1);  // What classes that ended held past 16.
    STOKER_RETURN_IF_ERROR(Finish(s, ds));
    return false;
  }

  // Then the rest, window 1 once all listed; ends the growth.
  void Rest() {
    lister_.BoundByStalls();
    absl::Status s = ListUntil(UINT64_MAX, 0, true);
    if (s.ok()) s = AppendWindow(1);
    Finish(s, nullptr).IgnoreError();
  }

  uint64_t skipped() const { return skipped_.load(); }

 private:
  // Lists each class not ended until it holds `end` images (`later`: a
  // streamed opening's windows past the first, fewer at a time);
  // `first_keys`: the first page's size (0: the store's).
  absl::Status ListUntil(uint64_t end, int first_keys, bool later = false) {
    std::vector<ClassListing*> todo;
    for (ClassListing& c : classes_) {
      if (!c.ended && c.images.size() < end) todo.push_back(&c);
    }
    std::vector<absl::Status> errors(todo.size());
    std::atomic<size_t> next{0};
    RunOnThreads(std::min<size_t>(ListingsAtOnce(classes_.size(), later), todo.size()), [&] {
      for (size_t t; (t = next.fetch_add(1)) < todo.size();) {
        errors[t] = ListClass(*todo[t], end, first_keys);
        if (!errors[t].ok()) next.store(todo.size());  // The first error ends it.
      }
    });
    for (const absl::Status& e : errors) {
      if (!e.ok()) return e;
    }
    return absl::OkStatus();
  }

  absl::Status ListClass(ClassListing& c, uint64_t end, int first_keys) {
    while (!c.ended && c.images.size() < end) {
      if (growth_->cancelled()->load()) return absl::CancelledError("the session ended");
      const int keys = c.images.empty() && c.token.empty() ? first_keys : 0;
      absl::StatusOr<ListPage> p = lister_.Page(c.prefix, "", c.token, keys);
      if (!p.ok()) return p.status();
      for (ListedObject& o : p->objects) {
        if (!HasImageExtension(o.key)) {
          skipped_.fetch_add(1);
          continue;
        }
        {
          absl::MutexLock lock(&charge_mu_);
          STOKER_RETURN_IF_ERROR(ChargeImage(o.key, o.etag, &charge_));
        }
        c.images.push_back(std::move(o));
      }
      c.token = p->truncated ? p->next_token : "";
      c.ended = !p->truncated;
    }
    return absl::OkStatus();
  }

  bool AllListed() const {
    for (const ClassListing& c : classes_) {
      if (!c.ended) return false;
    }
    return true;
  }

  // Window k's samples (0: each class's first images; 1: the others),
  // class by class, published unless none.
  absl::Status AppendWindow(int k) {
    // The objects a few thousand at a time (one lock each), before any
    // sample naming them is published.
    std::vector<std::pair<std::string, ListedObjectVersion>> objects;
    uint64_t appended = 0, listed = 0, unended = 0;
    for (size_t c = 0; c < classes_.size(); ++c) {
      const std::vector<ListedObject>& images = classes_[c].images;
      const size_t first = std::min<size_t>(images.size(), kFolderFirstWindowPerClass);
      for (size_t i = k == 0 ? 0 : first; i < (k == 0 ? first : images.size()); ++i) {
        std::string path = absl::StrCat("s3://", root_.bucket, "/", images[i].key);
        objects.emplace_back(path, ListedObjectVersion{images[i].size, images[i].etag});
        STOKER_RETURN_IF_ERROR(
            growth_->Append(Sample{std::move(path), static_cast<int32_t>(c), {}}));
        if (objects.size() == 4096) objects_->Add(std::exchange(objects, {}));
        ++appended;
      }
      listed += images.size();
      unended += classes_[c].ended ? 0 : 1;
    }
    objects_->Add(std::move(objects));
    if (appended > 0) growth_->PublishWindow();
    // What the caches plan for, until the end: a class not listed to its
    // end as about a store's page of images.
    growth_->SetExpected(listed + unended * 1000);
    return absl::OkStatus();
  }

  absl::Status Finish(absl::Status s, Dataset* ds) {
    if (s.ok() && growth_->published_samples() == 0) {
      s = absl::FailedPreconditionError(absl::StrCat(
          root_.ToString(), " holds no .jpg, .jpeg or .png objects under its classes"));
    }
    Dataset charged;
    const absl::Status cs = charge_.Finish(&charged);
    if (s.ok()) s = cs;
    if (s.ok()) Keep();  // Queued before any session sees the end.
    for (ClassListing& c : classes_) std::vector<ListedObject>().swap(c.images);
    if (ds == nullptr) {
      // Held as long as the published samples are served, even after an
      // error: they are until the sessions reach it.
      for (std::shared_ptr<void>& token : charged.list_charge) growth_->Hold(std::move(token));
    }
    growth_->Finish(s, static_cast<uint32_t>(classes_.size()));
    if (!s.ok()) return s;
    if (ds != nullptr) {
      ds->first_epoch_windows = growth_->Now().windows;
      ds->samples = growth_->TakeAll();
      ds->list_charge = std::move(charged.list_charge);
      ds->skipped_files = skipped();
    }
    return absl::OkStatus();
  }

  // A listing made now, kept class by class as listed, if it is not too
  // large to keep (its size counted as it is built).
  void Keep() {
    if (keep_.values == nullptr) return;
    kept::S3Listing listing;
    listing.set_listed_unix_seconds(absl::ToUnixSeconds(absl::Now()));
    listing.set_skipped(skipped());
    uint64_t bytes = 0;
    for (size_t c = 0; c < classes_.size(); ++c) {
      listing.add_class_names(classes_[c].name);
      bytes += classes_[c].name.size() + 8;
      for (const ListedObject& o : classes_[c].images) {
        bytes += o.key.size() + o.etag.size() + 24;  // Its fields' tags and lengths.
        if (bytes > kMostKeptBytes) return;
        kept::S3Listing::Object* k = listing.add_objects();
        k->set_key(o.key);
        k->set_size(o.size);
        k->set_etag(o.etag);
        k->set_label(static_cast<uint32_t>(c));
      }
    }
    keep_.values->Put(kept_key_, listing.SerializeAsString(), access_.owner);
  }

  const S3Url root_;
  const ObjectStoreAccess access_;
  const ScanLimits limits_;
  Lister lister_;
  std::vector<ClassListing> classes_;
  std::atomic<uint64_t> skipped_;
  absl::Mutex charge_mu_;
  ListCharge charge_;
  const KeptListing keep_;
  const std::string kept_key_;
  const std::shared_ptr<S3Objects> objects_;
  // Held while it writes; the dataset's handle cancels it (CancelOnDrop).
  const std::shared_ptr<DatasetGrowth> growth_;
};

// The first pages of a prefix listed flat (no delimiter): its keys in the
// store's order, charged to the caller (ListCharge's steps while listed,
// all of them before they are taken), the next page's token.
struct FlatPages {
  explicit FlatPages(const ScanLimits& limits) : charge(limits) {}
  std::vector<ListedObject> objects;
  std::string token;
  bool listed = false;
  bool ordered = true;  // Each key after the one before, as S3 lists them.
  ListCharge charge;
  bool whole() const { return listed && token.empty(); }
};

// The next page (uncounted: TakeFlat counts what it takes); at most
// max_files objects in all, as listed by class.
absl::Status ListFlatPage(const S3Url& root, Lister& lister, const ScanLimits& limits,
                          FlatPages* flat) {
  STOKER_ASSIGN_OR_RETURN(ListPage p,
                          lister.Page(root.key, "", flat->token, limits.flat_page_keys, false));
  if (flat->objects.size() + p.objects.size() > limits.max_files) return lister.TooMany();
  for (ListedObject& o : p.objects) {
    if (!flat->objects.empty() && !(flat->objects.back().key < o.key)) flat->ordered = false;
    STOKER_RETURN_IF_ERROR(flat->charge.Add(Sample{o.key, 0, {o.etag}}));
    flat->objects.push_back(std::move(o));
  }
  flat->listed = true;
  flat->token = p.truncated ? p.next_token : "";
  return absl::OkStatus();
}

// Whether the flat pages hold all of the class `prefix`: all of the
// folder is listed, or the class's keys all sort before the last one
// listed (in a store that lists in order).
bool FlatCovers(const FlatPages& flat, const std::string& prefix) {
  if (flat.whole()) return true;
  if (!flat.ordered || flat.objects.empty()) return false;
  const std::string& last = flat.objects.back().key;
  return prefix < last && !absl::StartsWith(last, prefix);
}

// Whether the flat listing goes on: the classes it covers, and the one it
// is in, say the whole is within `most` objects; not once every class is
// covered (the rest lie directly in the root, listed with the classes).
bool FlatGoesOn(const FlatPages& flat, const std::vector<ClassListing>& classes,
                uint64_t most) {
  if (flat.whole() || !flat.ordered || flat.objects.empty()) return false;
  uint64_t covered = 0;
  for (const ClassListing& c : classes) covered += FlatCovers(flat, c.prefix) ? 1 : 0;
  return covered < classes.size() &&
         static_cast<double>(flat.objects.size()) * static_cast<double>(classes.size()) <=
             static_cast<double>(most) * static_cast<double>(covered + 1);
}

// Takes from the flat pages the classes they hold whole: their objects
// counted as seen, their images charged (ChargeImage), the
// other objects counted in `skipped`; those classes end there. A class
// with no key in them (made since) is listed by class; objects directly in
// `root` were counted by the classes' listing.
absl::Status TakeFlat(const S3Url& root, FlatPages& flat, Lister& lister,
                      std::vector<ClassListing>* classes, ListCharge* charge,
                      uint64_t* skipped) {
  std::vector<std::pair<size_t, ListedObject*>> in_class;
  std::vector<bool> held(classes->size());
  for (ListedObject& o : flat.objects) {
    const size_t slash = o.key.find('/', root.key.size());
    if (slash == std::string::npos) continue;  // Directly in the root.
    const std::string prefix = o.key.substr(0, slash + 1);
    const auto at = std::lower_bound(
        classes->begin(), classes->end(), prefix,
        [](const ClassListing& c, const std::string& p) { return c.prefix < p; });
    if (at == classes->end() || at->prefix != prefix) continue;  // Not listed as a class.
    held[at - classes->begin()] = true;
    in_class.emplace_back(at - classes->begin(), &o);
  }
  std::vector<bool> covered(classes->size());
  for (size_t c = 0; c < classes->size(); ++c) {
    covered[c] = held[c] && FlatCovers(flat, (*classes)[c].prefix);
  }
  uint64_t seen = 0;
  for (const auto& [c, o] : in_class) seen += covered[c] ? 1 : 0;
  STOKER_RETURN_IF_ERROR(lister.Count(seen));
  for (auto& [c, o] : in_class) {
    if (!covered[c]) continue;
    if (!HasImageExtension(o->key)) {
      ++*skipped;
      continue;
    }
    STOKER_RETURN_IF_ERROR(ChargeImage(o->key, o->etag, charge));
    (*classes)[c].images.push_back(std::move(*o));
  }
  for (size_t c = 0; c < classes->size(); ++c) (*classes)[c].ended = covered[c];
  return absl::OkStatus();
}

// The classes below `root` by one delimited listing, sorted, with the
// images a flat listing beside it took of them (s3_folder.h); the .tar
// objects directly in it into `shards`, and the other objects there
// counted in `skipped`.
absl::StatusOr<std::vector<ClassListing>> ListClasses(const S3Url& root, Lister& lister,
                                                      const ScanLimits& limits,
                                                      ListCharge* charge,
                                                      std::vector<ListedObject>* shards,
                                                      uint64_t* skipped) {
  const int tasks = limits.flat_listing_objects > 0 ? 2 : 1;
  FlatPages flat(limits);
  std::vector<std::string> prefixes;
  absl::Status classes_listed, flat_listed;
  std::atomic<int> next{0};
  RunOnThreads(tasks, [&] {
    for (int t; (t = next.fetch_add(1)) < tasks;) {
      if (t == 1) {
        flat_listed = ListFlatPage(root, lister, limits, &flat);
        continue;
      }
      classes_listed = lister.Walk(root.key, "/", [&](ListPage& p) {
        for (std::string& c : p.prefixes) prefixes.push_back(std::move(c));
        *skipped += p.objects.size();
        for (ListedObject& o : p.objects) {
          if (IsShardKey(o.key)) shards->push_back(std::move(o));
        }
        return absl::OkStatus();
      });
    }
  });
  STOKER_RETURN_IF_ERROR(classes_listed);
  std::sort(prefixes.begin(), prefixes.end());
  prefixes.erase(std::unique(prefixes.begin(), prefixes.end()), prefixes.end());
  std::vector<ClassListing> classes(prefixes.size());
  for (size_t c = 0; c < prefixes.size(); ++c) {
    classes[c].name = std::string(absl::StripSuffix(prefixes[c].substr(root.key.size()), "/"));
    classes[c].prefix = std::move(prefixes[c]);
  }
  if (tasks == 1) return classes;
  for (size_t had = 0; flat_listed.ok() && flat.objects.size() > had &&
                       FlatGoesOn(flat, classes, limits.flat_listing_objects);) {
    had = flat.objects.size();  // A page that adds nothing ends it.
    flat_listed = ListFlatPage(root, lister, limits, &flat);
  }
  if (flat_listed.ok()) {
    Dataset held;  // What is left of the pages' charge, until they are taken.
    flat_listed = flat.charge.Finish(&held);
    if (flat_listed.ok()) {
      STOKER_RETURN_IF_ERROR(TakeFlat(root, flat, lister, &classes, charge, skipped));
    }
  }
  const absl::StatusCode code = flat_listed.code();
  if (code == absl::StatusCode::kCancelled || code == absl::StatusCode::kDeadlineExceeded ||
      code == absl::StatusCode::kResourceExhausted) {
    return flat_listed;
  }
  if (!flat_listed.ok()) {  // A store or policy that refuses it: by class.
    LogInfo(absl::StrCat(root.ToString(), ": listed by class, as listing it flat failed: ",
                         flat_listed.message()));
  }
  return classes;
}

}  // namespace

absl::StatusOr<Dataset> OpenS3Folder(const S3Url& url, const ObjectStoreAccess& access,
                                     ObjectStore* client, const ScanLimits& limits,
                                     const KeptListing& keep, const ReadAhead& ahead,
                                     const std::vector<std::string>& members) {
  S3Url root = url;
  if (!root.key.empty() && root.key.back() != '/') root.key += '/';
  // Per principal: what one key id's owner may list (an IAM prefix
  // condition, another tenant's bucket of the same name) is never taken by
  // another. The key id names the principal; it is not a secret.
  const std::string kept_key =
      CacheKey({"s3-listing", access.endpoint.ToString(), root.bucket, root.key,
                access.credentials != nullptr ? access.credentials->access_key_id : ""});
  ListCharge charge(limits);
  std::vector<ClassListing> classes;
  uint64_t skipped = 0;
  std::string listed_at;  // A kept listing's, when one is taken.
  if (keep.values != nullptr && !keep.refresh && access.credentials != nullptr) {
    kept::S3Listing listing;
    bool parsed = false;
    // The value is charged before it is parsed, until what the parse holds
    // has been charged sample by sample (TakeKept).
    std::shared_ptr<void> held;
    keep.values->Get(kept_key, [&](absl::string_view value) {
      held = limits.charge_list ? limits.charge_list(value.size()) : std::make_shared<int>(0);
      parsed = held != nullptr && value.size() <= INT_MAX &&
               listing.ParseFromArray(value.data(), static_cast<int>(value.size()));
    });
    bool fits =
        parsed && absl::FromUnixSeconds(listing.listed_unix_seconds()) + kKeptFor > absl::Now() &&
        TakeKept(root, listing, limits, &charge);
    held.reset();
    if (fits) {
      // The caller's own proof, at this moment, that it may list the
      // prefix: one request, signed as the key id the listing is kept
      // under (a client that names one key id and signs with another is
      // no proof: the listing is made afresh, with what it signs).
      auto as_named = std::make_shared<S3Credentials>(*access.credentials);
      as_named->signed_as_named = true;
      ObjectStoreAccess proving = access;
      proving.credentials = std::move(as_named);
      absl::StatusOr<ListPage> proof =
          client->List(proving, root.bucket, root.key, "/", "", 1, nullptr);
      if (!proof.ok() && proof.status().code() != absl::StatusCode::kAborted) {
        return proof.status();
      }
      fits = proof.ok();
    }
    if (fits) {
      classes.resize(listing.class_names_size());
      for (int c = 0; c < listing.class_names_size(); ++c) {
        classes[c].name = std::move(*listing.mutable_class_names(c));
        classes[c].ended = true;
      }
      for (kept::S3Listing::Object& o : *listing.mutable_objects()) {
        classes[o.label()].images.push_back(
            ListedObject{std::move(*o.mutable_key()), o.size(), std::move(*o.mutable_etag())});
      }
      skipped = listing.skipped();
      listed_at = absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                                   absl::FromUnixSeconds(listing.listed_unix_seconds()),
                                   absl::UTCTimeZone());
      LogInfo(absl::StrCat(root.ToString(), ": the listing kept from ", listed_at,
                           " (refresh lists it again)"));
    } else {
      charge = ListCharge(limits);  // Nothing of a refused one stays charged.
    }
  }
  const bool taken = !listed_at.empty();
  Lister lister(root, access, client, limits);
  if (!taken) {
    std::vector<ListedObject> shards;
    STOKER_ASSIGN_OR_RETURN(classes,
                            ListClasses(root, lister, limits, &charge, &shards, &skipped));
    if (classes.empty() && !shards.empty()) {  // A prefix of shards, listed now.
      return OpenS3Shards(root, {"", nullptr, "", members}, access, client, limits, keep, ahead,
                          &shards);
    }
    if (classes.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          root.ToString(), " has no class prefixes (an ImageFolder is <prefix>/<class>/<image>) "
                           "and no .tar shards"));
    }
  }
  STOKER_RETURN_IF_ERROR(MembersNeedShards(root.ToString(), members));
  Dataset ds;
  ds.windows_for_listing_only = true;
  // With the endpoint: the same bucket elsewhere is other content.
  // (Not when it was listed: a kept listing and a new one of the same
  // objects are one content for the pixel claims.)
  ds.description = absl::StrCat("s3:", root.ToString(), " at ", access.endpoint.ToString());
  for (const ClassListing& c : classes) ds.class_names.push_back(c.name);
  ds.num_classes = static_cast<uint32_t>(classes.size());
  // The listing sees at most max_files objects (the directory's size
  // bounded whatever the flag says).
  uint64_t capacity = std::min<uint64_t>(limits.max_files, uint64_t{1} << 32);
  if (taken) {
    capacity = 0;
    for (const ClassListing& c : classes) capacity += c.images.size();
  }
  auto objects = std::make_shared<S3Objects>(client, access, root.bucket, limits.max_file_bytes,
                                             ListedObjects(), listed_at);
  ds.source = objects;
  auto growth = std::make_shared<DatasetGrowth>(capacity, 0);
  ScanLimits scan = limits;
  // The listing may outlive this call: nothing of the caller's file
  // environment goes with it (no class is a local file).
  scan.within = nullptr;
  scan.fs = nullptr;
  auto listing = std::make_shared<FolderListing>(
      root, access, client, scan, taken ? nullptr : &lister, std::move(classes), skipped,
      std::move(charge),
      taken ? KeptListing{} : keep, kept_key, objects, growth);
  if (taken || !limits.streamed) {
    STOKER_RETURN_IF_ERROR(listing->Run(&ds));
    return ds;
  }
  // Streamed: answered once window 0 is published; the rest comes.
  STOKER_ASSIGN_OR_RETURN(const bool more, listing->First(&ds));
  if (!more) return ds;  // That was all.
  auto work = [listing, growth] {
    if (!RunLoggingExceptions("listing a folder", [&] { listing->Rest(); })) {
      growth->Finish(absl::InternalError("listing the folder failed (the daemon's log says why)"));
    }
  };  // The growth's end says how it ended.
  STOKER_ASSIGN_OR_RETURN(
      ds.growth, GrowInBackground(growth, limits, std::move(work), "the folder's listing"));
  ds.skipped_files = listing->skipped();
  return ds;
}

}  // namespace stoker
