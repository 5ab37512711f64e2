#include "server/sources/objects/s3_manifest.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/sources/objects/s3_lister.h"
#include "server/sources/objects/s3_objects.h"
#include "server/sources/objects/s3_shards.h"
#include "server/sources/shards/tar_index.h"
#include "util/status_macros.h"

namespace stoker {
namespace {

// The manifest's bytes, read as the caller: an object by a HEAD and a GET
// at that version, a local file beneath limits.within.
absl::StatusOr<std::string> ReadManifest(const std::string& manifest,
                                         const ObjectStoreAccess& access, ObjectStore* client,
                                         const ScanLimits& limits) {
  std::string text;
  if (!absl::StartsWith(manifest, "s3://")) {
    FileSystem* fs = limits.fs != nullptr ? limits.fs : FileSystem::Default();
    absl::Status read = fs->ReadFile(manifest, &text, nullptr, limits.within,
                                     limits.max_file_bytes);
    if (!read.ok()) {
      return absl::Status(read.code(), absl::StrCat("dataset manifest ", read.message()));
    }
    return text;
  }
  absl::StatusOr<S3Url> object = S3Url::Parse(manifest);
  if (!object.ok()) return object.status();
  absl::StatusOr<ObjectVersion> v =
      client->Head(access, *object, "");
  if (!v.ok()) return v.status();
  if (v->etag.empty()) {
    return absl::DataLossError(
        absl::StrCat("dataset manifest ", manifest, ": the store gave no ETag"));
  }
  if (v->size > limits.max_file_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "dataset manifest ", manifest, ": ", v->size,
        " bytes, over the daemon's file size cap of ", limits.max_file_bytes));
  }
  if (v->size == 0) return text;
  ObjectVersion seen;
  absl::Status s = client->Get(access, *object, 0, v->size, v->etag, &text, &seen, nullptr);
  if (s.ok() && (!IsListedVersion(seen, v->size, v->etag) || text.size() != v->size)) {
    s = absl::AbortedError(absl::StrCat("dataset manifest ", manifest,
                                        " changed while it was read: open the dataset again"));
  }
  if (!s.ok()) return s;
  return text;
}

}  // namespace

absl::StatusOr<Dataset> OpenS3Manifest(const S3Url& url, const std::string& manifest,
                                       const ObjectStoreAccess& access, ObjectStore* client,
                                       const ScanLimits& limits, const KeptListing& keep,
                                       const ReadAhead& ahead,
                                       const std::vector<std::string>& members) {
  absl::StatusOr<std::string> text = ReadManifest(manifest, access, client, limits);
  if (!text.ok()) return text.status();
  // Each line as it is parsed, charged as the sample it becomes (the
  // lines are dropped once the samples are made; their charge with them).
  ListCharge lines_charge(limits);
  std::vector<std::vector<std::string>> lines;
  std::vector<int32_t> labels;
  uint64_t shards = 0;
  absl::Status parsed = ParseManifestText(
      manifest, *text, limits, kMaxFilesPerSample,
      [&](std::vector<std::string> keys, int32_t label) -> absl::Status {
        if (absl::Status cs = lines_charge.Add(Sample{"", label, keys}); !cs.ok()) return cs;
        if (keys.size() == 1 && IsShardKey(keys[0])) ++shards;
        lines.push_back(std::move(keys));
        labels.push_back(label);
        return absl::OkStatus();
      },
      /*label_optional=*/true);
  if (!parsed.ok()) return parsed;
  std::string().swap(*text);
  if (lines.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("dataset manifest ", manifest, " names no samples"));
  }
  S3Url root = url;
  if (!root.key.empty() && root.key.back() != '/') root.key += '/';
  if (shards == lines.size()) {
    std::vector<std::string> names;
    names.reserve(lines.size());
    for (std::vector<std::string>& l : lines) names.push_back(std::move(l[0]));
    return OpenS3Shards(root, ShardNames{"", &names, manifest, members}, access, client, limits,
                        keep, ahead);
  }
  STOKER_RETURN_IF_ERROR(MembersNeedShards(absl::StrCat("dataset manifest ", manifest), members));
  if (shards > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dataset manifest ", manifest, " lists ", shards, " .tar shards among ",
        lines.size() - shards, " other samples: a manifest lists shards or objects, not both"));
  }
  // The keys it names, and each folder they lie in, listed once; of what
  // the listings hold, only those keys are kept.
  absl::flat_hash_map<std::string, ListedObject> named;
  std::vector<std::string> folders;
  {
    absl::flat_hash_map<std::string, bool> seen;
    for (const std::vector<std::string>& l : lines) {
      for (const std::string& key : l) {
        const std::string full = root.key + key;
        std::string folder = FolderOf(full);
        if (seen.emplace(folder, true).second) {
          if (absl::Status cs = lines_charge.Add(Sample{folder, 0, {}}); !cs.ok()) return cs;
          folders.push_back(std::move(folder));
        }
        if (named.emplace(full, ListedObject{}).second) {
          if (absl::Status cs = lines_charge.Add(Sample{full, 0, {}}); !cs.ok()) return cs;
        }
      }
    }
  }
  Lister lister(root, access, client, limits);
  absl::Status listed = ListFolders(lister, folders, [&](ListPage& p) {
    for (ListedObject& o : p.objects) {
      auto it = named.find(o.key);
      if (it != named.end()) it->second = std::move(o);
    }
    return absl::OkStatus();
  });
  if (!listed.ok()) return listed;
  Dataset ds;
  ds.description = absl::StrCat("s3-manifest:", manifest, " in ", root.ToString(), " at ",
                                access.endpoint.ToString());
  ds.files_per_sample = static_cast<uint32_t>(lines[0].size());
  ListCharge charge(limits);
  ListedObjects objects;
  for (size_t i = 0; i < lines.size(); ++i) {
    Sample sample{"", labels[i], {}};
    for (size_t k = 0; k < lines[i].size(); ++k) {
      const std::string key = root.key + lines[i][k];
      const ListedObject& o = named[key];
      if (o.etag.empty()) {  // Not listed: the Lister refuses an object without one.
        return absl::NotFoundError(absl::StrCat("dataset manifest ", manifest, " sample ", i + 1,
                                                ": no object s3://", root.bucket, "/",
                                                Shown(key)));
      }
      std::string path = absl::StrCat("s3://", root.bucket, "/", key);
      if (objects.emplace(path, ListedObjectVersion{o.size, o.etag}).second) {
        // Its listed identity, held as long as the samples are.
        if (absl::Status cs = charge.Add(Sample{path, 0, {o.etag}}); !cs.ok()) return cs;
      }
      (k == 0 ? sample.path : sample.more.emplace_back()) = std::move(path);
    }
    if (absl::Status cs = charge.Add(sample); !cs.ok()) return cs;
    ds.samples.push_back(std::move(sample));
    std::vector<std::string>().swap(lines[i]);
  }
  ds.num_classes = NumClasses(ds.samples);
  if (absl::Status cs = charge.Finish(&ds); !cs.ok()) return cs;
  ds.source = std::make_shared<S3Objects>(client, access, root.bucket, limits.max_file_bytes,
                                          std::move(objects), "");
  return ds;
}

}  // namespace stoker
