// The files of WebDataset shards' samples in an S3 API store, read as the
// caller: a sample's file is "s3://bucket/<shard key>#<offset>+<size>",
// a member of one of the dataset's listed shards (its bytes inside it),
// and a kept member's ends in ".<its extension>" (empty, it is data; absent
// from its sample, it is named at offset and size 0).
// A read is a ranged GET of the member at the shard's listed version
// (DATA_LOSS when the shard changed since). A cached copy of a member is
// served to a session only once it has shown it may read that shard with
// its own credentials (a bit per shard): indexing the shard proves it
// (Proven); otherwise (a kept index) the first Identify of one of the
// shard's members sends one HEAD at the listed version (others of the
// shard wait for it).
//
// Thread-safe; the client outlives the source.
#ifndef STOKER_SERVER_SOURCES_OBJECTS_S3_SHARD_MEMBERS_H_
#define STOKER_SERVER_SOURCES_OBJECTS_S3_SHARD_MEMBERS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "server/dataset/sample_source.h"
#include "server/objstore/object_store.h"
#include "server/sources/objects/s3_lister.h"
#include "server/sources/objects/s3_shard_list.h"

namespace stoker {

// A member's name: `in_shard` ("s3://bucket/<shard key>#"), its offset and
// size, and `kept`, a kept member's extension ("" for a picture or mask).
std::string ShardMemberName(const std::string& in_shard, uint64_t offset, uint64_t size,
                            const std::string& kept = "");

// The L2 key of one member's bytes (the file part of its SourceKey).
std::string ShardMemberFile(const ObjectStoreAccess& access, const std::string& bucket,
                            const ListedShard& shard, uint64_t offset, uint64_t size);

class S3ShardMembers : public ObjectStoreSource {
 public:
  // `max_bytes`: the daemon's file size cap, for a member.
  S3ShardMembers(ObjectStore* client, ObjectStoreAccess access, std::string bucket,
                 uint64_t max_bytes, std::vector<ListedShard> shards);

  // This session read shard `k` itself (to index it): its proof.
  void Proven(uint32_t k) const { proven_[k].store(true, std::memory_order_release); }

  absl::StatusOr<SourceKey> Identify(const std::string& path) const override;
  absl::Status Read(const std::string& path, std::string* out,
                    FileVersion* version) const override;
  bool EmptyIsData(const std::string& path) const override;
  bool lists_bytes() const override { return true; }
  std::optional<uint64_t> ListedBytes(const std::string& path) const override;

 private:
  struct Member {
    uint32_t shard = 0;
    uint64_t offset = 0, size = 0;
    bool kept = false;  // A kept member's (its name ends in its extension).
  };
  absl::Status Prove(uint32_t k) const;
  absl::StatusOr<Member> Find(const std::string& path) const;

  ObjectStore* const client_;
  const ObjectStoreAccess access_;
  const std::string bucket_;
  const std::string in_bucket_;  // "s3://bucket/": what every member's name starts with.
  const uint64_t max_bytes_;
  const std::vector<ListedShard> shards_;
  absl::flat_hash_map<std::string, uint32_t> by_key_;  // Shards by key.
  // This session's proofs: it has read from the shard (or its HEAD).
  const std::unique_ptr<std::atomic<bool>[]> proven_;
  const std::unique_ptr<absl::Mutex[]> proving_;
};

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_OBJECTS_S3_SHARD_MEMBERS_H_
