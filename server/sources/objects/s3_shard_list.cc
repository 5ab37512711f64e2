#include "server/sources/objects/s3_shard_list.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/sources/objects/s3_lister.h"
#include "server/sources/shards/tar_index.h"
#include "server/sources/shards/webdataset.h"

namespace stoker {

bool IsShardKey(const std::string& key) { return absl::EndsWithIgnoreCase(key, ".tar"); }

absl::Status MembersNeedShards(const std::string& what,
                               const std::vector<std::string>& members) {
  if (members.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, " holds objects, not WebDataset shards: member '", members[0],
      "' is a shard's (a field's member, dataset.s3.members); read a file beside each "
      "sample with a manifest's file instead"));
}

std::string ShardPrefix(const S3Url& root) {
  std::string prefix = root.key;
  if (!prefix.empty() && prefix.back() != '/') prefix += '/';
  return prefix;
}

absl::StatusOr<std::vector<ListedShard>> ListShards(const S3Url& root, const ShardNames& named,
                                              const ObjectStoreAccess& access,
                                              ObjectStore* client, const ScanLimits& limits,
                                              std::vector<ListedObject>* given) {
  const std::string& pattern = named.pattern;
  const std::vector<std::string>* names = named.names;
  if (pattern.empty() && names == nullptr && IsShardKey(root.key)) {  // One shard: its HEAD.
    absl::StatusOr<ObjectVersion> v =
        client->Head(access, root, "");
    if (!v.ok()) return v.status();
    if (v->etag.empty()) {
      return absl::DataLossError(absl::StrCat(root.ToString(), ": the store gave no ETag"));
    }
    return std::vector<ListedShard>{ListedShard{root.key, v->size, v->etag}};
  }
  const std::string prefix = ShardPrefix(root);
  absl::flat_hash_map<std::string, ListedShard> listed;
  // A manifest's names: of what its folders hold, only those are kept.
  absl::flat_hash_map<std::string, bool> wanted;
  for (size_t i = 0; names != nullptr && i < names->size(); ++i) {
    wanted.emplace(prefix + (*names)[i], true);
  }
  auto take = [&](std::vector<ListedObject>& objects) {
    for (ListedObject& o : objects) {
      if (IsShardKey(o.key) && (names == nullptr || wanted.contains(o.key))) {
        listed[o.key] = ListedShard{o.key, o.size, std::move(o.etag)};
      }
    }
  };
  if (given != nullptr) {
    take(*given);
  } else if (names != nullptr) {
    // The folders the names lie in, each listed delimited.
    std::vector<std::string> folders;
    absl::flat_hash_map<std::string, bool> seen;
    for (const std::string& name : *names) {
      std::string folder = FolderOf(prefix + name);
      if (seen.emplace(folder, true).second) folders.push_back(std::move(folder));
    }
    Lister lister(root, access, client, limits);
    absl::Status s = ListFolders(lister, folders, [&](ListPage& p) {
      take(p.objects);
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
  } else {
    // Names in folders below the prefix only when the pattern has some.
    Lister lister(root, access, client, limits);
    absl::Status s = lister.Walk(prefix, pattern.find('/') == std::string::npos ? "/" : "",
                                 [&](ListPage& p) {
                                   take(p.objects);
                                   return absl::OkStatus();
                                 });
    if (!s.ok()) return s;
  }
  std::vector<ListedShard> shards;
  if (!pattern.empty() || names != nullptr) {
    std::optional<ShardPattern> p;
    if (names == nullptr) {
      absl::StatusOr<ShardPattern> parsed = ShardPattern::Parse(pattern, limits.max_files);
      if (!parsed.ok()) return parsed.status();
      p = *std::move(parsed);
    }
    const uint64_t count = names != nullptr ? names->size() : p->size();
    absl::flat_hash_map<std::string, bool> seen;
    for (uint64_t i = 0; i < count; ++i) {
      const std::string key = prefix + (names != nullptr ? (*names)[i] : p->Name(i));
      auto it = listed.find(key);
      if (it == listed.end()) {
        return absl::NotFoundError(absl::StrCat("no shard s3://", root.bucket, "/", Shown(key),
                                                names != nullptr ? " (the manifest names it)"
                                                                 : " (the pattern names it)"));
      }
      if (seen.emplace(key, true).second) shards.push_back(it->second);
    }
  } else {
    for (auto& [key, shard] : listed) shards.push_back(std::move(shard));
    std::sort(shards.begin(), shards.end(),
              [](const ListedShard& a, const ListedShard& b) { return a.key < b.key; });
  }
  if (shards.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(root.ToString(), " holds no .tar shards"));
  }
  return shards;
}

}  // namespace stoker
