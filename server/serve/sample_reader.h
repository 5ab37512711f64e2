// A session's reader stage: where one sample's inputs come from, with the
// session's whole cache policy in one place.
//
// Read() produces one sample, in this order:
//  - typed arrays (an npy or HDF5 source): their regions are copied straight
//    into the sample's place; there is no decode stage;
//  - a cacheable pipeline's finished sample from the decoded cache;
//  - with the pixel cache (bounded by max_side, or automatic while the
//    session's PixelKeeper looks), every spatial field's kept picture;
//  - else, or for any picture missing, the sample's encoded files from the
//    fetcher (L1 RAM, L2 disk, storage: server/cache/fetcher.h).
// Every file is identified through the caller's confinement before any
// cache is asked, so nothing cached is served to a caller that may not
// open the file, or for another version of it.
//
// The decode stage then asks Picture() for each spatial field (a decode, or
// the pixel cache's picture, filled on a miss: bounded, or exact as a
// whole decode makes it, kept while the keeper keeps) and, when KeepsDecoded(),
// hands the finished sample back with KeepDecoded(). Finished samples are
// kept only when the whole epoch fits the decoded cache: an LRU over a
// larger sequential scan would copy every sample in and never hit.
//
// Thread-safe: a session's reader and decode threads call it concurrently.
// The dataset, pipeline and caches outlive it.
#ifndef STOKER_SERVER_SERVE_SAMPLE_READER_H_
#define STOKER_SERVER_SERVE_SAMPLE_READER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/cache/cache.h"
#include "server/dataset/dataset.h"
#include "server/cache/fetcher.h"
#include "server/serve/histogram.h"
#include "server/pipeline/pipeline.h"
#include "server/cache/pixel_cache.h"
#include "server/serve/pixel_keeper.h"
#include "server/serve/row_gather.h"
#include "server/serve/epoch_tally.h"
#include "shm/ring_data.h"

namespace stoker {

// Where one sample's fields are written: field f's bytes of the sample (a
// ring slot's, or a test's own buffers). Not owned.
struct SampleOut {
  std::array<uint8_t*, shm::kMaxFields> field{};
};

// What the reader uses, shared by the daemon's sessions, and whom what it
// writes to L2 is charged to.
struct ReaderCaches {
  SampleFetcher* fetcher = nullptr;
  ShardedLruCache* decoded = nullptr;  // Finished samples of cacheable pipelines.
  PixelCache* pixels = nullptr;        // Bounded or automatic pictures.
  LatencyHistogram* fetch_latency = nullptr;  // Optional: time per sample read.
  DecodeLimits decode_limits;
  int64_t owner = L2Cache::kNobody;  // The session's uid.
  // Where decodes over kKeptDecodeBytes are charged (null: nowhere).
  MemoryBudget* decode_room = nullptr;
};

// One spatial field's picture as the pixel cache had it.
struct CachedPicture {
  Bytes entry;  // Null on a miss.
  std::string key;  // Empty: not looked up.
  SourceKey file;   // As the caller's confinement identified it.
  bool versioned = false;  // L2 applies: the fill is queued there too.
  bool other_scale = false;  // Exact: kept at another DCT scale only.
  bool whole_only = false;   // Exact: kept for whole decodes only (this
                             // session decodes regions): decoded each time.
};

// What the reader hands the decode stage.
struct FetchedSample {
  std::string decoded_key;  // Cacheable pipelines: the decoded cache's key.
  std::vector<Bytes> files;  // Encoded, per file of the sample; empty when
                             // every picture came from the pixel cache.
  std::vector<CachedPicture> pictures;  // Per field (spatial ones used).
  // The files' room among the bytes in flight (SampleFetcher::Charge),
  // held until the decode stage drops the sample.
  std::shared_ptr<void> held;
};

class SampleReader {
 public:
  // `field_bytes`: each field's bytes per sample (the ring layout's).
  // `max_side`: the pixel cache's bound (0: none). `keeper` (may be null:
  // no pixel cache unless bounded) decides what is kept automatically.
  SampleReader(const Dataset& dataset, const Pipeline& pipeline, uint64_t seed,
               int max_side, std::vector<uint64_t> field_bytes, ReaderCaches caches,
               PixelKeeper* keeper = nullptr);

  struct Result {
    enum Kind {
      kDone,         // Written into the sample's place whole.
      kDecode,       // *in holds what the decode stage needs.
      kReadError,    // A file could not be identified or read.
      kDecodeError,  // An array file that is not one, or of a shape the
                     // fields do not take (like an undecodable image).
    } kind;
    absl::Status error;  // Names the file when it is not the sample's first.
  };
  // Reads sample `index` for `epoch` (an array field's patch is drawn from
  // them and the seed).
  // A file the session proved before that is no longer at its path
  // (ABORTED from its source) is identified afresh, once.
  Result Read(uint64_t index, uint64_t epoch, const SampleOut& out, FetchedSample* in) const;

  // Copies the whole array fields of samples indices[0..n) into positions
  // 0..n-1 of `out` (field f's k-th at out.field[f] + k * its bytes per
  // sample) when they lie as rows in memory (server/serve/row_gather.h), up to
  // the first it cannot: returns how many. Read() then gives that one and
  // its error. 0 unless the source is typed arrays taken whole.
  size_t ReadRows(const uint64_t* indices, size_t n, const SampleOut& out) const;

  // Field f's picture: decoded for this sample into `image`, or the pixel
  // cache's (filled on a miss, into `entry`); `*view` is what to render
  // (`image` may hold it: a kept JPEG's window). `plan` as DecodeImage's;
  // with the bounded cache it is called once with the kept size (the
  // geometry is drawn at that size), with the exact one with the file's
  // size (twice when a JPEG is filled: for its scale, then its window).
  // Errors as DecodeImage's.
  absl::Status Picture(size_t f, const FetchedSample& in,
                       const std::function<RegionRequest(int, int)>& plan,
                       Image* image, Bytes* entry, ImageView* view) const;

  // Whether the decode stage renders a finished sample privately and hands
  // it back (KeepDecoded); then DecodedBytes() is its size: the spatial
  // fields, one after another.
  bool KeepsDecoded() const { return keeps_decoded_; }
  // The limits its decodes and the decode stage's run under: the caches'
  // decode_limits, a decode over kKeptDecodeBytes (server/imaging/jpeg.h)
  // charged to the owner in the caches' decode_room before it allocates
  // (apart from reads, whose bytes wait for decodes: a decode never waits
  // for them).
  const DecodeLimits& decode_limits() const { return caches_.decode_limits; }
  uint64_t DecodedBytes() const { return decoded_bytes_; }
  // Copies `value` (as KeepsDecoded describes) into `out` and keeps it.
  void KeepDecoded(const FetchedSample& in, std::shared_ptr<std::string> value,
                   const SampleOut& out) const;

  // Time spent reading (caches, storage, array copies), summed over threads.
  uint64_t read_ns() const { return read_ns_.load(std::memory_order_relaxed); }
  // Requests to a remote source (SampleSource::remote) per epoch, failed
  // ones too; the session begins each epoch in it.
  EpochTally& remote_reads() const { return remote_; }

 private:
  Result ReadOnce(uint64_t index, uint64_t epoch, const SampleOut& out,
                  FetchedSample* in) const;
  Result ReadArrays(uint64_t index, uint64_t epoch, const SampleOut& out) const;
  absl::Status CopyArrays(uint64_t index, uint64_t epoch, const SampleOut& out) const;
  // One array field of sample `index` at `start` into dst: read (converted
  // to the field's dtype), or read as float32 through the value stage and
  // then converted; then the per-pixel stage.
  absl::Status CopyArray(const ArraySource& src, uint64_t index, const FieldPlan& field,
                         const std::vector<uint64_t>& start, const Effects& effects,
                         uint8_t* dst) const;
  // Whether this sample's pictures are looked up in the pixel cache.
  bool UsesPixels() const;
  // Pixel-cache lookups for every spatial field of sample `index` in
  // `epoch`, its file as `ids` names it; true when all hit.
  bool LookupPixels(const std::vector<SourceKey>& ids, uint64_t index, uint64_t epoch,
                    FetchedSample* in) const;
  // Automatic mode: field f's kept picture at the DCT scale sample `index`
  // of `epoch` decodes it at (its geometry drawn at the kept picture's
  // size, as the renderer draws it; `canvases` holds the sample's once
  // drawn); null when it is not kept at that scale.
  Bytes LookupExact(size_t f, const ImageRequest& request, uint64_t index, uint64_t epoch,
                    std::vector<Canvas>* canvases, CachedPicture* pic) const;
  // Automatic mode, on a miss: the picture decoded whole, at the DCT scale
  // `plan` asks for (and kept when the keeper keeps it); null when this
  // picture is not for the cache (nothing is kept now, or the whole decode
  // failed).
  Bytes FillExact(size_t f, const FetchedSample& in, const ImageRequest& request,
                  const std::function<RegionRequest(int, int)>& plan) const;
  // Copies a decoded-cache value into the spatial fields of `out`.
  void CopySpatial(const std::string& value, const SampleOut& out) const;
  // Time since t0 for `n` samples read.
  void Count(uint64_t t0, uint64_t n = 1) const;

  const Dataset& dataset_;
  const Pipeline& pipeline_;
  const uint64_t seed_;
  const int max_side_;
  PixelKeeper* const keeper_;
  const std::vector<uint64_t> field_bytes_;
  // `caches` with its decodes charged: decode_limits.reserve set to wait
  // for room in `decode_room`, for `owner`, as reads wait for theirs.
  static ReaderCaches Charged(ReaderCaches caches, const Dataset& dataset);

  const ReaderCaches caches_;
  // Everything but the files that identifies this session's finished
  // samples in the decoded cache (built once, not per sample).
  const std::string decoded_key_prefix_;
  uint64_t decoded_bytes_ = 0;
  bool keeps_decoded_ = false;
  std::unique_ptr<RowGather> rows_;  // Whole feature rows; null otherwise.
  mutable std::atomic<uint64_t> read_ns_{0};
  mutable EpochTally remote_;
};

}  // namespace stoker

#endif  // STOKER_SERVER_SERVE_SAMPLE_READER_H_
