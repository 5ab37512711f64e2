// Which shards an object store dataset names (s3_shards.h), with the
// identity each is listed at: one .tar object (its HEAD), a brace
// pattern's names or a manifest's (the folders they lie in listed, only
// the named kept), or every .tar object directly in a prefix (key order).
// Listed as the caller, page by page (Lister). A name not listed is
// NOT_FOUND naming it; a name given twice is one shard; none at all is
// FAILED_PRECONDITION.
#ifndef STOKER_SERVER_SOURCES_OBJECTS_S3_SHARD_LIST_H_
#define STOKER_SERVER_SOURCES_OBJECTS_S3_SHARD_LIST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/dataset/dataset.h"
#include "server/objstore/object_store.h"
#include "server/sources/objects/s3_lister.h"

namespace stoker {

// The shards of a prefix: all of them (both empty), those a brace pattern
// names, or those a manifest lists (`names`, keys below the prefix, in
// order; `manifest` says where, for the dataset's description); and the
// members each sample keeps (S3Source.members).
struct ShardNames {
  std::string pattern;
  const std::vector<std::string>* names = nullptr;
  std::string manifest;
  std::vector<std::string> members;
};

// INVALID_ARGUMENT where `members` are asked of `what`, a dataset of
// objects, not shards; else OK.
absl::Status MembersNeedShards(const std::string& what,
                               const std::vector<std::string>& members);

// Whether `key` names a shard (ends in .tar, in any case).
bool IsShardKey(const std::string& key);

struct ListedShard {
  std::string key;
  uint64_t size = 0;
  std::string etag;
};

// The prefix a pattern's or manifest's names are below: root's key, ending
// in '/' unless empty.
std::string ShardPrefix(const S3Url& root);

// The shards `root` and `named` name. `given`: the prefix's .tar objects,
// listed by the caller already (null: list them here).
absl::StatusOr<std::vector<ListedShard>> ListShards(const S3Url& root, const ShardNames& named,
                                                    const ObjectStoreAccess& access,
                                                    ObjectStore* client, const ScanLimits& limits,
                                                    std::vector<ListedObject>* given);

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_OBJECTS_S3_SHARD_LIST_H_
