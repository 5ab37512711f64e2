#include "server/sources/shards/shard_assembly.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/sources/shards/webdataset.h"
#include "util/status_macros.h"

namespace stoker {

uint64_t ShardCapacity(const std::vector<uint64_t>& shard_bytes, uint64_t max_files) {
  uint64_t n = 0;
  for (uint64_t b : shard_bytes) {
    n += b / 512 + 1;
    if (n >= max_files) return max_files;
  }
  return n;
}

ShardAssembly::ShardAssembly(size_t shards, Name name, std::vector<std::string> kept,
                             const ScanLimits& limits, DatasetGrowth* growth)
    : shards_(shards),
      name_(std::move(name)),
      kept_(std::move(kept)),
      limits_(limits),
      streamed_(limits.streamed),
      growth_(growth),
      charge_(limits) {}

absl::Status ShardAssembly::Add(size_t i, kept::ShardIndex index) {
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) return error_;
  done_.emplace(i, std::move(index));
  for (auto it = done_.begin(); it != done_.end() && it->first == next_;
       it = done_.erase(it), ++next_) {
    const uint32_t shard = static_cast<uint32_t>(next_);
    per_shard_.push_back(it->second.samples_size());
    skipped_ += it->second.skipped();
    for (const kept::ShardIndex::Sample& s : it->second.samples()) {
      if (s.members_size() != static_cast<int>(kept_.size())) {  // KeptIndexFits checks it.
        error_ = absl::InternalError("a shard's index does not hold the members kept");
        return error_;
      }
      Sample out{name_(shard, s.image_offset(), s.image_size(), ""), s.label(), {}};
      if (s.has_mask()) out.more.push_back(name_(shard, s.mask_offset(), s.mask_size(), ""));
      for (int k = 0; k < s.members_size(); ++k) {
        out.more.push_back(name_(shard, s.members(k).offset(), s.members(k).size(), kept_[k]));
      }
      all_masked_ = all_masked_ && s.has_mask();
      max_label_ = std::max<int64_t>(max_label_, s.label());
      if (absl::Status c = charge_.Add(out); !c.ok()) {
        error_ = c;
        return error_;
      }
      window_.push_back(std::move(out));
    }
    if (next_ + 1 == shards_ || WindowOfShard(next_ + 1, true) != WindowOfShard(next_, true)) {
      if (absl::Status a = AppendWindow(); !a.ok()) {
        error_ = a;
        return error_;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ShardAssembly::AppendWindow() {
  if (!decided_ && !window_.empty()) {
    masks_ = all_masked_;  // The first window with samples decides.
    decided_ = true;
  }
  for (Sample& s : window_) {
    const bool masked = s.more.size() > kept_.size();
    if (!masks_ && masked) {
      s.more.erase(s.more.begin());
    } else if (masks_ && !masked) {
      s.more.insert(s.more.begin(), std::string());  // No mask: a read error where read.
    }
    STOKER_RETURN_IF_ERROR(growth_->Append(std::move(s)));
  }
  window_.clear();
  growth_->PublishWindow();
  return absl::OkStatus();
}

bool ShardAssembly::masks() const {
  absl::MutexLock lock(&mu_);
  return masks_;
}

std::vector<std::string> ShardAssembly::member_files() const {
  return ShardMemberFiles(masks(), kept_);
}

uint64_t ShardAssembly::skipped() const {
  absl::MutexLock lock(&mu_);
  return skipped_;
}

absl::Status ShardAssembly::Finish(absl::Status status, const std::string& what, Dataset* ds) {
  absl::MutexLock lock(&mu_);
  if (status.ok()) status = error_;
  if (status.ok() && next_ != shards_) {
    status = absl::InternalError(absl::StrCat(what, ": ", shards_ - next_, " shards not indexed"));
  }
  Dataset charged;
  if (status.ok()) status = charge_.Finish(&charged);
  if (streamed_) {
    if (status.ok() && growth_->published_samples() == 0) status = NoSamplesError(what);
    for (std::shared_ptr<void>& token : charged.list_charge) growth_->Hold(std::move(token));
    growth_->Finish(status, static_cast<uint32_t>(std::min<int64_t>(max_label_ + 1, UINT32_MAX)));
    return status;
  }
  growth_->Finish(status);
  if (!status.ok()) return status;
  ds->samples = growth_->TakeAll();
  ds->list_charge = std::move(charged.list_charge);
  ds->skipped_files += skipped_;
  return FinishShardDataset(what, per_shard_, masks_, kept_, ds, /*growing_windows=*/true);
}

}  // namespace stoker
