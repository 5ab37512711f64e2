#include "server/serve/pixel_keeper.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace stoker {

std::unique_ptr<PixelKeeper> PixelKeeper::Off(std::string why) {
  return std::unique_ptr<PixelKeeper>(new PixelKeeper(v1::PIXEL_MODE_OFF, false, std::move(why)));
}

std::unique_ptr<PixelKeeper> PixelKeeper::Bounded(int max_side) {
  return std::unique_ptr<PixelKeeper>(new PixelKeeper(
      v1::PIXEL_MODE_BOUNDED, false,
      absl::StrCat("pictures kept with a longer side of at most ", max_side, " (max_side)")));
}

std::unique_ptr<PixelKeeper> PixelKeeper::Automatic(PixelShares* shares, uint64_t id,
                                                    int64_t uid, std::string content,
                                                    uint64_t samples, uint32_t pictures) {
  auto k = std::unique_ptr<PixelKeeper>(
      new PixelKeeper(v1::PIXEL_MODE_ESTIMATING, true, "measuring the first pictures"));
  k->shares_ = shares;
  k->id_ = id;
  k->uid_ = uid;
  k->content_ = std::move(content);
  k->pictures_ = samples * pictures;
  absl::MutexLock lock(&k->mu_);
  k->next_check_ = std::max<uint64_t>(1, std::min(kFirstEstimate, k->pictures_));
  return k;
}

std::unique_ptr<PixelKeeper> PixelKeeper::ForSession(uint64_t id, int64_t uid,
                                                     const v1::SessionSpec& spec,
                                                     const Pipeline& p, const Dataset& ds,
                                                     PixelShares* shares, const PixelCache* pixels,
                                                     const DecodeLimits& limits) {
  if (spec.pixel_cache().max_side() > 0) {
    return PixelKeeper::Bounded(static_cast<int>(spec.pixel_cache().max_side()));
  }
  if (spec.pixel_cache().off()) return PixelKeeper::Off("asked off (pixel_cache.off)");
  uint32_t pictures = 0;
  for (const FieldPlan& f : p.fields()) pictures += f.spatial() ? 1 : 0;
  if (pictures == 0) return PixelKeeper::Off("no image or mask fields");
  if (p.client_decode().on) return PixelKeeper::Off("the client decodes (client_decode)");
  if (shares == nullptr || pixels == nullptr || shares->capacity() == 0) {
    return PixelKeeper::Off("this daemon keeps no pictures (--pixel-cache-bytes 0)");
  }
  // What the user's sessions over the same pictures share (ranks of a job
  // on one node): the dataset, the DCT scales kept (whole only, or what
  // each crop asks for), each field's request.
  std::string content =
      absl::StrCat(ds.description, "|", p.scale_decode() ? "scales" : "whole");
  for (const FieldPlan& f : p.fields()) {
    if (!f.spatial()) continue;
    const ImageRequest r = p.Request(f, limits);
    absl::StrAppend(&content, "|", r.channels, ":", r.elem_bytes, ":", r.indices ? 1 : 0);
  }
  return PixelKeeper::Automatic(shares, id, uid, std::move(content), ds.expected_samples(),
                                pictures);
}

PixelKeeper::~PixelKeeper() {
  if (shares_ != nullptr) shares_->Release(id_);
}

bool PixelKeeper::Lookup() {
  v1::PixelMode mode = mode_.load(std::memory_order_relaxed);
  const bool kept = mode == v1::PIXEL_MODE_KEPT;
  const bool refused = mode == v1::PIXEL_MODE_NOT_KEPT || mode == v1::PIXEL_MODE_PARTLY_KEPT;
  if (automatic_ &&
      ((kept && shares_->revoked() != revoked_seen_.load(std::memory_order_relaxed)) ||
       (refused && shares_->released() != released_seen_.load(std::memory_order_relaxed)))) {
    absl::MutexLock lock(&mu_);
    revoked_seen_.store(shares_->revoked(), std::memory_order_relaxed);
    mode = mode_.load();
    if (mode == v1::PIXEL_MODE_KEPT && Revoked()) {
      mode = v1::PIXEL_MODE_PARTLY_KEPT;
      mode_.store(mode);
      why_ = kRevokedWhy;
    }
    if ((mode == v1::PIXEL_MODE_NOT_KEPT || mode == v1::PIXEL_MODE_PARTLY_KEPT) &&
        shares_->released() != released_seen_.load(std::memory_order_relaxed)) {
      if (estimate_ > 0) {
        Ask(mode);
        mode = mode_.load();
      } else {
        released_seen_.store(shares_->released(), std::memory_order_relaxed);
      }
    }
  }
  switch (mode) {
    case v1::PIXEL_MODE_BOUNDED:
    case v1::PIXEL_MODE_ESTIMATING:
    case v1::PIXEL_MODE_KEPT:
    case v1::PIXEL_MODE_PARTLY_KEPT:
      return true;
    default:
      return false;
  }
}

bool PixelKeeper::Ask(v1::PixelMode refused) {
  released_seen_.store(shares_->released(), std::memory_order_relaxed);
  std::string why;
  claim_ = shares_->Ask(id_, content_, uid_, estimate_, &why);
  if (claim_ == nullptr) {
    mode_.store(refused);
    why_ = std::move(why);
    return false;
  }
  mode_.store(v1::PIXEL_MODE_KEPT);
  why_ = "the dataset's pictures fit this user's share of the pixel cache";
  return true;
}

bool PixelKeeper::Wants() const {
  if (!automatic_) return false;
  const v1::PixelMode mode = mode_.load(std::memory_order_relaxed);
  if (mode == v1::PIXEL_MODE_ESTIMATING) return true;
  if (mode != v1::PIXEL_MODE_KEPT) return false;
  absl::MutexLock lock(&mu_);
  return claim_ != nullptr && claim_->granted.load();
}

bool PixelKeeper::Keep(uint64_t bytes, bool another_scale) {
  if (!automatic_) return false;
  absl::MutexLock lock(&mu_);
  const v1::PixelMode mode = mode_.load();
  if (mode == v1::PIXEL_MODE_NOT_KEPT || mode == v1::PIXEL_MODE_PARTLY_KEPT) return false;
  if (!another_scale || seen_ == 0) ++seen_;
  bytes_ += bytes + kEntryOverhead;
  const double mean = static_cast<double>(bytes_) / seen_;
  const bool counted = seen_ >= next_check_ && seen_ <= pictures_;
  const bool grown = mode == v1::PIXEL_MODE_KEPT && mean > claimed_mean_ * 9 / 8;
  if (counted || grown) {
    // Clamped: a huge dataset's estimate must not wrap around.
    estimate_ = static_cast<uint64_t>(std::min(mean * pictures_, 1.8e19));
    claimed_mean_ = mean;
    if (counted) {
      next_check_ = std::min(pictures_, next_check_ * 2);
      if (seen_ == pictures_) next_check_ = pictures_ + 1;  // Measured whole.
    }
    if (!Ask(mode == v1::PIXEL_MODE_ESTIMATING ? v1::PIXEL_MODE_NOT_KEPT
                                               : v1::PIXEL_MODE_PARTLY_KEPT)) {
      return false;
    }
  }
  if (mode_.load() == v1::PIXEL_MODE_ESTIMATING) return true;
  if (Revoked()) {
    mode_.store(v1::PIXEL_MODE_PARTLY_KEPT);
    why_ = kRevokedWhy;
    return false;
  }
  return true;
}

void PixelKeeper::Found(uint64_t bytes) {
  if (mode_.load(std::memory_order_relaxed) == v1::PIXEL_MODE_ESTIMATING) Keep(bytes);
}

void PixelKeeper::TurnOff(const std::string& why) {
  if (!automatic_) return;
  absl::MutexLock lock(&mu_);
  mode_.store(v1::PIXEL_MODE_OFF);
  why_ = why;
  if (shares_ != nullptr) shares_->Release(id_);
  claim_ = nullptr;
}

void PixelKeeper::Stats(v1::SessionStats* s) const {
  absl::MutexLock lock(&mu_);
  v1::PixelMode mode = mode_.load();
  std::string why = why_;
  if (mode == v1::PIXEL_MODE_KEPT && Revoked()) {
    mode = v1::PIXEL_MODE_PARTLY_KEPT;
    why = kRevokedWhy;
  }
  s->set_pixel_mode(mode);
  s->set_pixel_cache_why(why);
  s->set_pixel_cache_bytes(estimate_);
}

}  // namespace stoker
