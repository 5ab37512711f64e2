// The pixel cache (SessionSpec.pixel_cache): pictures decoded once, for
// pipelines that then only crop and resize every epoch. Exact entries
// (max_side 0) are the whole picture as a whole decode of the file makes
// it (a JPEG's at one DCT scale, one entry per scale), kept in RAM only;
// bounded ones are scaled so their longer side is at most max_side. One
// entry per (file, max_side, scale, decode request) in a RAM LRU shared by
// all sessions, and, for bounded entries of sources whose files carry a
// version (not LMDB), in L2 too: entries outlive the daemon and are
// checked against the file's size and mtime.
//
// An entry depends only on the file's bytes, max_side, the scale and the
// request, never on the cache's state, so a session's batches are the same
// whether its pictures come from RAM, L2 or a fresh decode. An exact
// entry seen through ExactView is what the session's own decode of the
// region it asks for gives, pixel for pixel, in every place the renderer
// weighs.
//
// Thread-safe. The caches outlive it.
#ifndef STOKER_SERVER_CACHE_PIXEL_CACHE_H_
#define STOKER_SERVER_CACHE_PIXEL_CACHE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/cache/cache.h"
#include "server/imaging/decode.h"
#include "server/access/file_system.h"
#include "server/cache/l2_cache.h"
#include "server/dataset/sample_source.h"
#include "server/cache/single_flight.h"
#include "server/imaging/transform.h"

namespace stoker {

// The size a w x h picture is kept at: unchanged when its longer side is
// at most max_side, else the longer side max_side and the shorter scaled
// in proportion (rounded, at least 1).
void BoundedSize(int w, int h, int max_side, int* out_w, int* out_h);

// Decodes `data` whole and scales it to BoundedSize: a JPEG at the
// smallest DCT scale that keeps both sides at least the bounded size, then
// resampled with `filter` (nearest for anything but 8-bit samples).
// max_side 0: exact, the whole decode's pixels as they are, a JPEG's at
// the DCT scale `eighths`/8 (anything else is never scaled). The entry
// holds a small header and the packed pixels. Errors as DecodeImage.
absl::StatusOr<Bytes> DecodeBounded(const uint8_t* data, size_t size,
                                    const ImageRequest& request, int max_side,
                                    Filter filter, int eighths = 8);

// The pixels of an entry made by DecodeBounded (whole, as kept).
ImageView PixelsOf(const Bytes& entry);

// What an exact entry is a picture of.
struct KeptPicture {
  int source_width = 0, source_height = 0;  // The file's picture.
  int eighths = 8;      // The DCT scale it was kept at.
  bool scaled = false;  // A JPEG: kept per DCT scale, one entry each.
  // A JPEG whose regions decode otherwise than its whole (a progressive
  // file with coefficients left unsent): it serves whole decodes only.
  bool whole_only = false;
};
KeptPicture KeptOf(const Bytes& entry);

// An exact entry's picture as a decode for `want` gives it: a JPEG's
// RegionWindow at its scale (packed into `scratch` when it is not whole
// rows), a PNG whose rows decode alone the rows that decode keeps (the
// resampler's weights follow the window's origin), anything else whole.
// INTERNAL when `want` asks a JPEG's entry for another scale,
// FAILED_PRECONDITION when it asks a whole_only one for a region.
absl::StatusOr<ImageView> ExactView(const Bytes& entry, const RegionRequest& want,
                                    Image* scratch);

class PixelCache {
 public:
  // `l2` may be null.
  PixelCache(ShardedLruCache* ram, L2Cache* l2) : ram_(ram), l2_(l2) {}

  // The entry's L2 key for a file that SampleSource::Identify named `file`
  // (L2 checks the version it recorded; RAM keys add the version).
  // `max_side`: the bound, or 0 for exact entries; `eighths`: an exact
  // JPEG entry's DCT scale (8 for anything else).
  static std::string Key(const SourceKey& file, int max_side,
                         const ImageRequest& request, int eighths = 8);

  // RAM, else L2 (then kept in RAM); null on a miss. `file` is the caller's
  // own identification of the file (so its confined stat has succeeded);
  // reads L2 when `l2`: call from the reader stage. `*versioned` tells
  // whether L2 applies to it (for Fill). `refresh`: as the LRU's (a
  // session whose claim was revoked lets its pictures age out first).
  Bytes Lookup(const SampleSource& source, const SourceKey& file,
               const std::string& key, bool* versioned, bool l2 = true, bool refresh = true);
  // RAM only, neither counted as a lookup nor refreshed: whether a picture
  // is kept under `key` (which scales of a JPEG are), before its lookup.
  Bytes Peek(const SourceKey& file, const std::string& key);
  // DecodeBounded (`eighths` as there), then kept in RAM (under `key` at
  // `version`) and queued for L2 (when `versioned`) charged to `owner` (the
  // session's uid),
  // unless `keep` (may be null) says no for the entry's size: the picture
  // is then only returned. A picture filled meanwhile is taken as is, and
  // concurrent fills of one key decode once (the others wait for it).
  absl::StatusOr<Bytes> Fill(const std::string& key, const Bytes& encoded,
                             const ImageRequest& request, int max_side, int eighths,
                             Filter filter, bool versioned, const FileVersion& version,
                             int64_t owner,
                             const std::function<bool(uint64_t bytes)>& keep = nullptr);

  uint64_t decodes() const { return decodes_.load(std::memory_order_relaxed); }

 private:
  ShardedLruCache* const ram_;
  L2Cache* const l2_;
  std::atomic<uint64_t> decodes_{0};
  SingleFlight<absl::StatusOr<Bytes>> fills_;  // By RAM key.
};

}  // namespace stoker

#endif  // STOKER_SERVER_CACHE_PIXEL_CACHE_H_
