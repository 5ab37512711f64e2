#include "server/sources/objects/s3_shard_index.h"

#include <map>
#include <utility>

#include "server/sources/objects/s3_shard_members.h"
#include "server/sources/shards/tar_index.h"
#include "server/sources/shards/webdataset.h"

namespace stoker {
namespace {

// A shard read forward, a block at a time, as the caller, at its listed
// version: what ForEachTarMember and the members' bytes are read from.
class ShardStream {
 public:
  // `fetched` and `progress` count the bytes read.
  ShardStream(const S3Url& object, const ListedShard& shard, const ObjectStoreAccess& access,
              ObjectStore* client, const std::function<absl::Status()>& check,
              std::atomic<uint64_t>* fetched, std::atomic<uint64_t>* requests,
              OpeningProgress* progress)
      : object_(object),
        shard_(shard),
        access_(access),
        client_(client),
        check_(check),
        fetched_(fetched),
        requests_(requests),
        progress_(progress) {}

  // The shard's first block, read already (its version checked): counted
  // as read now.
  void Preload(std::string block) {
    block_ = std::move(block);
    at_ = 0;
    progress_->Read(block_.size());
  }

  absl::Status Read(uint64_t offset, size_t n, char* out) {
    while (n > 0) {
      if (offset < at_ || offset >= at_ + block_.size()) {
        if (absl::Status s = Fetch(offset); !s.ok()) return s;
      }
      const size_t piece = std::min<uint64_t>(n, at_ + block_.size() - offset);
      std::copy_n(block_.data() + (offset - at_), piece, out);
      offset += piece;
      out += piece;
      n -= piece;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Fetch(uint64_t offset) {
    if (absl::Status s = check_(); !s.ok()) return s;
    if (offset >= shard_.size) return absl::DataLossError("a read past the shard's end");
    const uint64_t n = std::min(kShardBlockBytes, shard_.size - offset);
    ObjectVersion seen;
    requests_->fetch_add(1);
    // A GET in flight ends with the opening (its session dropped, the
    // daemon stopping, the deadline, another shard's error).
    absl::Status s = client_->Get(access_, object_, offset, n, shard_.etag, &block_, &seen,
                                  [this] { return !check_().ok(); });
    if (s.code() == absl::StatusCode::kCancelled) {
      if (absl::Status c = check_(); !c.ok()) return c;
    }
    if (s.code() == absl::StatusCode::kFailedPrecondition ||
        s.code() == absl::StatusCode::kNotFound) {
      return absl::DataLossError(
          absl::StrCat("the shard changed while it was indexed (", s.message(), ")"));
    }
    if (!s.ok()) return s;
    if (block_.size() != n || !IsListedVersion(seen, shard_.size, shard_.etag)) {
      return absl::DataLossError("the shard changed while it was indexed");
    }
    at_ = offset;
    fetched_->fetch_add(n);
    progress_->Read(n);
    return absl::OkStatus();
  }

  const S3Url& object_;
  const ListedShard& shard_;
  const ObjectStoreAccess& access_;
  ObjectStore* const client_;
  const std::function<absl::Status()>& check_;
  std::atomic<uint64_t>* const fetched_;
  std::atomic<uint64_t>* const requests_;
  OpeningProgress* const progress_;
  std::string block_;
  uint64_t at_ = 0;
};

}  // namespace

uint64_t ShardIndexBytes(uint64_t samples, size_t kept_members) {
  constexpr uint64_t kPerSample = sizeof(kept::ShardIndex::Sample) + 16;
  constexpr uint64_t kPerMember = sizeof(kept::ShardIndex::Sample::Member) + 8;
  return samples * (kPerSample + kept_members * kPerMember);
}

absl::StatusOr<kept::ShardIndex> IndexShard(ShardIndexing& ix, const ListedShard& shard,
                                             std::string* first_block) {
  const S3Url object{ix.root.bucket, shard.key};
  ShardStream stream(object, shard, ix.access, ix.client, ix.check, &ix.bytes, &ix.requests,
                     ix.progress);
  if (first_block != nullptr) stream.Preload(std::move(*first_block));
  kept::ShardIndex index;
  // The bytes of the members of the sample being grouped, by offset.
  std::map<uint64_t, std::string> pending;
  // Of them, the bytes counted in ix.kept_ahead and not kept yet: given
  // back once the sample is done (a sample skipped keeps none).
  uint64_t open_ahead = 0;
  auto keep = [&](uint64_t offset, uint64_t size) {
    auto it = pending.find(offset);
    // Not read ahead (or a label's first bytes); an empty one is an error.
    if (ix.ahead.keep == nullptr || it == pending.end() || size == 0 ||
        it->second.size() != size) {
      return;
    }
    SourceKey id{ShardMemberFile(ix.access, ix.root.bucket, shard, offset, size),
                 ObjectFileVersion(shard.size, shard.etag), nullptr};
    ix.ahead.keep(id, std::move(it->second));
    pending.erase(it);  // Kept once, where a member is both a picture and kept.
    open_ahead -= size;
  };
  bool image_seen = false;  // The open sample's first picture has streamed by.
  WebDatasetGrouper grouper([&](WebDatasetSample sample) -> absl::Status {
    const auto [image, mask, cls] = FieldsOf(sample);
    if (image == nullptr) {
      index.set_skipped(index.skipped() + 1);
    } else {
      if (index.samples_size() % 1024 == 0) {
        const uint64_t bytes = ShardIndexBytes(1024, ix.kept_members.size());
        if (absl::Status c = ix.Charge(bytes); !c.ok()) return c;
      }
      kept::ShardIndex::Sample* s = index.add_samples();
      s->set_image_offset(image->offset);
      s->set_image_size(image->size);
      if (mask != nullptr) {
        s->set_has_mask(true);
        s->set_mask_offset(mask->offset);
        s->set_mask_size(mask->size);
      }
      if (cls != nullptr) {
        auto text = pending.find(cls->offset);
        absl::StatusOr<int32_t> label =
            ParseLabel(text == pending.end() ? std::string() : text->second, sample.key);
        if (!label.ok()) return label.status();
        s->set_label(*label);
      }
      keep(image->offset, image->size);
      if (mask != nullptr) keep(mask->offset, mask->size);
      for (const std::string& extension : ix.kept_members) {  // Absent: offset and size 0.
        kept::ShardIndex::Sample::Member* m = s->add_members();
        if (const WebDatasetSample::Field* f = FieldNamed(sample, extension); f != nullptr) {
          m->set_offset(f->offset);
          m->set_size(f->size);
          keep(f->offset, f->size);
        }
      }
    }
    // This sample's members, and members without a key before it.
    pending.erase(pending.begin(), pending.upper_bound(sample.fields.back().offset));
    ix.kept_ahead.fetch_sub(open_ahead);
    open_ahead = 0;
    image_seen = false;
    return absl::OkStatus();
  });
  uint64_t seen = 0;
  absl::Status s = ForEachTarMember(
      [&](uint64_t offset, size_t n, char* out) { return stream.Read(offset, n, out); },
      shard.size, ix.limits.max_files, [&](TarMember m) -> absl::Status {
        if (++seen % 4096 == 0) {
          if (absl::Status c = ix.check(); !c.ok()) return c;
        }
        if (ix.members.fetch_add(1) >= ix.limits.max_files) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "over ", ix.limits.max_files, " members in all (--max-dataset-files)"));
        }
        if (absl::Status a = grouper.Add(m); !a.ok()) return a;
        // What a sample takes, read as it streams by: a label's first
        // bytes (enough to refuse a long one); the first picture and the
        // mask, when small enough and while the read-ahead has room.
        const WebDatasetSample::Field* f = grouper.added();
        if (f == nullptr) return absl::OkStatus();
        const std::vector<std::string>& km = ix.kept_members;
        const bool kept = std::find(km.begin(), km.end(), f->extension) != km.end();
        const bool used = IsUsedField(f->extension);
        if (!kept && !used) return absl::OkStatus();
        const bool label = f->extension == "cls", mask = f->extension == "seg.png";
        const bool image = used && !label && !mask;
        const bool first_image = image && !image_seen;
        image_seen = image_seen || image;
        uint64_t n = 0;
        const bool ahead = ix.ahead.keep != nullptr &&
                           m.size <= std::min(kMostReadAhead, ix.limits.max_file_bytes);
        if (label) {
          n = std::min(m.size, kMaxLabelBytes + 1);
          if (kept && ahead && m.size == n) {  // Whole: kept as a member, counted.
            ix.kept_ahead.fetch_add(n);
            open_ahead += n;
          }
        } else if ((mask || first_image || kept) && ahead) {
          if (ix.kept_ahead.fetch_add(m.size) + m.size <= ix.ahead.most_bytes) {
            n = m.size;
            open_ahead += n;
          } else {
            ix.kept_ahead.fetch_sub(m.size);  // Refused: the room stays for smaller ones.
          }
        }
        if (n == 0) return absl::OkStatus();
        std::string& bytes = pending[m.offset];
        bytes.resize(n);
        return stream.Read(m.offset, n, bytes.data());
      });
  if (s.ok()) s = grouper.Finish();
  if (!s.ok()) return s;
  index.set_skipped(index.skipped() + grouper.skipped());
  index.set_members(seen);
  return index;
}

bool KeptIndexFits(const kept::ShardIndex& index, const ListedShard& shard, size_t members) {
  auto inside = [&](uint64_t offset, uint64_t size) {
    return offset <= shard.size && size <= shard.size - offset;
  };
  for (const kept::ShardIndex::Sample& s : index.samples()) {
    if (!inside(s.image_offset(), s.image_size()) || s.label() < 0 ||
        (s.has_mask() && !inside(s.mask_offset(), s.mask_size())) ||
        static_cast<size_t>(s.members_size()) != members) {
      return false;
    }
    for (const kept::ShardIndex::Sample::Member& m : s.members()) {
      if (!inside(m.offset(), m.size())) return false;
    }
  }
  return true;
}

}  // namespace stoker
