// One session's use of the daemon's pixel cache (SessionSpec.pixel_cache):
//  - off: asked off, or nothing to keep (arrays, client decode);
//  - bounded: max_side given, pictures kept scaled, by the user's choice;
//  - automatic (the default): pictures kept exactly as the session's own
//    decode makes them (whole), while the dataset's fit this user's share
//    of the cache (PixelShares).
// Automatic starts by estimating: the first pictures are kept and
// measured; then the estimate (samples x pictures per sample x mean bytes)
// is claimed, and claimed again each time the pictures measured double or
// the mean grows by an eighth (JPEGs kept at more DCT scales).
// Granted: kept. Refused: not kept, and the reader stops asking the cache
// (a dataset that does not fit costs nothing more). A claim revoked by
// another user's share, or refused on revision: partly kept; its lookups
// then leave its pictures to age out of the LRU first. Refused or
// revoked, it asks again after another claim is released.
//
// Thread-safe; the shares outlive it. The claim is released on
// destruction.
#ifndef STOKER_SERVER_SERVE_PIXEL_KEEPER_H_
#define STOKER_SERVER_SERVE_PIXEL_KEEPER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/stoker.pb.h"
#include "server/cache/cache.h"
#include "server/cache/pixel_cache.h"
#include "server/cache/pixel_shares.h"
#include "server/dataset/dataset.h"
#include "server/pipeline/pipeline.h"

namespace stoker {

class PixelKeeper {
 public:
  // Pictures measured before the first claim.
  static constexpr uint64_t kFirstEstimate = 16;
  // What the cache charges an entry beyond its key and value (the LRU's
  // bookkeeping), counted per picture.
  static constexpr uint64_t kEntryOverhead = ShardedLruCache::kEntryOverhead;

  // Off or bounded (`why` says why it is off, for stats).
  static std::unique_ptr<PixelKeeper> Off(std::string why);
  static std::unique_ptr<PixelKeeper> Bounded(int max_side);
  // Automatic, for session `id` of `uid` over `samples` samples of
  // `pictures` spatial fields each, claimed as `content` (what the user's
  // sessions over the same pictures share: PixelShares).
  static std::unique_ptr<PixelKeeper> Automatic(PixelShares* shares, uint64_t id, int64_t uid,
                                                std::string content, uint64_t samples,
                                                uint32_t pictures);
  // What the cache does for session `id` of `uid` running `spec` (its
  // compiled `pipeline`) over `dataset`: bounded when asked, off when asked
  // or when nothing can be kept (no pictures, client decode, no cache:
  // `shares` or `pixels` null or empty), else automatic.
  static std::unique_ptr<PixelKeeper> ForSession(uint64_t id, int64_t uid,
                                                 const v1::SessionSpec& spec,
                                                 const Pipeline& pipeline, const Dataset& dataset,
                                                 PixelShares* shares, const PixelCache* pixels,
                                                 const DecodeLimits& limits);
  ~PixelKeeper();

  bool automatic() const { return automatic_; }
  // Whether the reader looks pictures up in the cache (asked per sample:
  // a refused or revoked claim is asked again here once room was given
  // back since).
  bool Lookup();
  // Whether lookups refresh the pictures found (not while partly kept).
  bool Refreshes() const {
    return mode_.load(std::memory_order_relaxed) != v1::PIXEL_MODE_PARTLY_KEPT;
  }
  // Automatic: whether a missing picture is decoded whole for the cache
  // (estimating, or kept with the claim standing).
  bool Wants() const;
  // Automatic: a picture was decoded whole for this session, its entry
  // charging `bytes` (value and key); whether to keep it. `another_scale`:
  // the picture is kept already at another DCT scale (its bytes grow the
  // mean per picture; it is not counted again).
  bool Keep(uint64_t bytes, bool another_scale = false);
  // Automatic: a picture this session needs was found kept already (by
  // another session, or an earlier one); while estimating it is measured
  // as Keep measures, so a session whose pictures are all kept claims them.
  void Found(uint64_t bytes);
  // Automatic: nothing to keep for this session after all (why): off.
  void TurnOff(const std::string& why);
  // pixel_mode, pixel_cache_why, pixel_cache_bytes.
  void Stats(v1::SessionStats* s) const;

 private:
  // Asks for estimate_ (the first time, on revision, or again); sets the
  // mode and why. Returns whether granted.
  bool Ask(v1::PixelMode refused) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the standing claim was revoked (the session is then partly
  // kept, for kRevokedWhy).
  bool Revoked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return claim_ != nullptr && !claim_->granted.load();
  }
  static constexpr char kRevokedWhy[] = "another user's share of the pixel cache took the room";

  PixelKeeper(v1::PixelMode mode, bool automatic, std::string why)
      : automatic_(automatic), mode_(mode), why_(std::move(why)) {}

  PixelShares* shares_ = nullptr;
  uint64_t id_ = 0;
  std::string content_;
  int64_t uid_ = -1;
  uint64_t pictures_ = 0;  // Of the whole dataset.
  const bool automatic_;
  std::atomic<v1::PixelMode> mode_;
  mutable absl::Mutex mu_;
  std::string why_ ABSL_GUARDED_BY(mu_);
  uint64_t seen_ ABSL_GUARDED_BY(mu_) = 0;  // Pictures measured.
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_check_ ABSL_GUARDED_BY(mu_) = kFirstEstimate;
  uint64_t estimate_ ABSL_GUARDED_BY(mu_) = 0;
  double claimed_mean_ ABSL_GUARDED_BY(mu_) = 0;  // Bytes per picture claimed.
  std::shared_ptr<const PixelShares::Claim> claim_ ABSL_GUARDED_BY(mu_);
  // shares_->released() when last asked, shares_->revoked() when last
  // looked: Lookup() takes the lock only when they moved.
  std::atomic<uint64_t> released_seen_{0}, revoked_seen_{0};
};

}  // namespace stoker

#endif  // STOKER_SERVER_SERVE_PIXEL_KEEPER_H_
