// The decoded-volume cache: chunked or compressed volumes (HDF5, NIfTI)
// decoded once, whole, and kept in RAM shared by every session, least
// recently used first out, within one budget (--volume-cache-bytes). A
// patch of a kept volume then costs a strided copy instead of a library
// read and an inflate.
//
// A volume is decoded once however many readers ask at the same time (the
// others wait for it); its decode may spread its work (chunk inflates) over
// the daemon's decode pool through the Parallel it is given. A volume of
// pieces (chunks) may instead be filled piece by piece as reads need them
// (GetPieces), so a first patch waits only for the chunks it touches.
// Things derived from a volume (a label volume's foreground) are kept
// beside it in the same budget (Keep). A volume that
// does not fit the whole budget is never decoded here: Get answers null and
// the caller reads it region by region (counted as oversized). A failed
// decode is returned to its waiters and not kept, so a later Get tries
// again.
//
// Entries are keyed by their caller: the key must name the file version
// (path, device, inode, size, mtime) and how it was decoded.
//
// With a Spill (the daemon's L2, on local disk), a volume once decoded
// whole (or its last piece filled) is written there too, and a volume not
// in RAM is looked for there before it is decoded: found again after a
// restart, or after its eviction, for the cost of one copy.
//
// With a Background (the daemon's: server/pool/idle_work.h), a volume filled
// piece by piece goes on filling its other pieces, one per task, while
// trainers are busy with their steps: later epochs then find it whole instead
// of waiting for the chunks their patches touch. It stops when the volume
// is whole or evicted, or at a fill's error (a read that needs that piece
// tries it again; the next read of the volume starts the background again
// past it).
//
// A volume's bytes are anonymous pages mapped untouched (Pages): its
// decode or its piece fills fault them in, on the pool's threads and only
// where they write, instead of one thread zeroing the whole volume first.
//
// Decodes in flight (Get's, before their volume is kept) hold at most the
// cache's capacity in all and half of it for one owner (a uid; one larger
// decode runs alone): a decode waits for room (30 s at most, then it is
// read by region as a volume too large), so concurrent decodes of many
// large volumes cannot take more memory than the cache itself, and one
// user's cannot take it all.
//
// Thread-safe.
#ifndef STOKER_SERVER_CACHE_VOLUME_CACHE_H_
#define STOKER_SERVER_CACHE_VOLUME_CACHE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/status/statusor.h"
#include "proto/stoker.pb.h"
#include "util/buffer.h"
#include "server/cache/cache.h"
#include "server/access/memory_budget.h"
#include "server/cache/single_flight.h"

namespace stoker {

class VolumeCache {
 public:
  // Runs fn(0) .. fn(n - 1), each once, in parallel where it can; returns
  // when all have run (ParallelFor on the decode pool).
  using Parallel = std::function<void(size_t n, const std::function<void(size_t)>& fn)>;
  // Decodes a volume into `out`, `bytes` long (the Get's), spreading its
  // work with `parallel`.
  using Decode = std::function<absl::Status(const Parallel& parallel, uint8_t* out)>;

  // Runs every item on the caller, in order (a Parallel without helpers).
  static void Serial(size_t n, const std::function<void(size_t)>& fn) {
    for (size_t i = 0; i < n; ++i) fn(i);
  }

  // `parallel` null: decodes run on their caller alone (Serial).
  explicit VolumeCache(uint64_t capacity_bytes, Parallel parallel = nullptr);

  // Where decoded volumes also go, and are found again (L2).
  struct Spill {
    // Keeps `bytes` under `key`; may drop them (a full queue or disk).
    std::function<void(const std::string& key, const Buffer& bytes)> put;
    // Copies what is kept under `key` into `out` when it is `bytes` long;
    // false when nothing (or something else) is kept.
    std::function<bool(const std::string& key, uint64_t bytes, uint8_t* out)> get;
  };
  // Before any Get (the daemon sets it when it opens its L2).
  void set_spill(Spill spill) { spill_ = std::move(spill); }
  // Runs `task` when nothing else waits for the pool; may drop it.
  using Background = std::function<void(std::function<void()> task)>;
  // Before any GetPieces; none: volumes fill only the pieces reads need.
  void set_background(Background background) { background_ = std::move(background); }

  // The `bytes` decoded bytes of volume `key`: kept ones, else decode()'s
  // (once for concurrent callers, after waiting for room in flight for
  // `owner`: a uid, or -1), then kept. Null, without decoding, when they
  // could never fit the budget. decode()'s error as is.
  absl::StatusOr<Buffer> Get(const std::string& key, uint64_t bytes, const Decode& decode,
                             int64_t owner = -1);

  // Fills piece `piece` of a volume (a chunk) into its place in `volume`,
  // the whole volume's bytes; pieces never overlap. Kept for the
  // background fill after GetPieces returns, so it must hold what it reads
  // (weakly: an error once that is gone).
  using FillPiece = std::function<absl::Status(uint64_t piece, uint8_t* volume)>;
  // The `bytes` of volume `key`, made of `pieces` pieces, with at least the
  // pieces in `need` filled (a patch's chunks): a first read then waits
  // only for what it touches. The volume's bytes are allocated and charged
  // whole when first asked for; each piece is filled once by fill(),
  // however many callers need it (the others wait), and the pieces one
  // call fills are spread over the pool; the rest are filled in the
  // background (set_background). Null, without filling, when the
  // volume could never fit. fill()'s first error as is; that piece stays
  // unfilled and a later call tries it again. Counted as a decode when its
  // last piece is filled. `key` must not also be used with Get.
  absl::StatusOr<Buffer> GetPieces(const std::string& key, uint64_t bytes, uint64_t pieces,
                                  const std::vector<uint64_t>& need, FillPiece fill);

  // What is kept under `key` (something derived from a volume, such as a
  // label volume's foreground index, keyed by the volume's key and what was
  // derived): kept bytes, else make()'s (once for concurrent callers),
  // then kept when they fit. make()'s error as is.
  absl::StatusOr<Buffer> Keep(const std::string& key,
                              const std::function<absl::StatusOr<Buffer>()>& make);

  uint64_t capacity_bytes() const { return ram_.capacity_bytes(); }
  // What decodes spread their work with (also for whole reads kept
  // elsewhere, such as feature files held in RAM).
  const Parallel& parallel() const { return parallel_; }
  // Tier "volumes": hits, misses, entries, bytes, evictions, inserts.
  v1::TierStats Stats() const { return ram_.Stats(); }
  uint64_t decodes() const { return decodes_.load(std::memory_order_relaxed); }
  uint64_t oversized() const { return oversized_.load(std::memory_order_relaxed); }
  // Bytes Get's decodes hold now, before their volumes are kept.
  uint64_t inflight_bytes() const { return inflight_.used(); }
  // Pieces GetPieces filled, and of them those the background filled.
  uint64_t pieces() const { return pieces_filled_.load(std::memory_order_relaxed); }
  uint64_t background_pieces() const {
    return background_filled_.load(std::memory_order_relaxed);
  }
  // Volumes written to the spill, and found there instead of decoded.
  uint64_t spilled() const { return spilled_.load(std::memory_order_relaxed); }
  uint64_t unspilled() const { return unspilled_.load(std::memory_order_relaxed); }

 private:
  struct Pieces;
  // The volume `key` being filled piece by piece, created and kept when
  // new; null when it is whole (*entry) or could never fit (*entry null).
  absl::StatusOr<std::shared_ptr<Pieces>> FindPieces(const std::string& key, uint64_t bytes, uint64_t pieces,
                                     Buffer* entry);
  // The volume from the spill into new pages, kept; null when it is not
  // there. Call from within decoding_ for `key`.
  Buffer Unspill(const std::string& key, uint64_t bytes);
  // Fills `need`'s empty pieces of v, and waits for those others fill.
  absl::Status Fill(Pieces& v, const std::vector<uint64_t>& need, const FillPiece& fill);
  // Fills piece p of v, which the caller took (kEmpty to kFilling).
  absl::Status FillOne(Pieces& v, uint64_t p, const FillPiece& fill);
  // After v's last piece: forgets it as being filled and spills it, once.
  void Completed(const std::string& key, const std::shared_ptr<Pieces>& v);
  // One background step: fills v's next empty piece, then queues the next.
  void FillRest(const std::string& key, const std::weak_ptr<Pieces>& weak,
                const FillPiece& fill);

  LruCache<std::string_view> ram_;  // One shard: a volume may take the whole budget.
  MemoryBudget inflight_;  // Get's decodes until kept.
  const Parallel parallel_;
  SingleFlight<absl::StatusOr<Buffer>> decoding_;
  absl::Mutex pieces_mu_;
  // Volumes still being filled piece by piece; their bytes are kept in ram_.
  absl::flat_hash_map<std::string, std::weak_ptr<Pieces>> pieces_ ABSL_GUARDED_BY(pieces_mu_);
  std::atomic<uint64_t> decodes_{0}, oversized_{0}, pieces_filled_{0}, spilled_{0}, unspilled_{0},
      background_filled_{0};
  Spill spill_;
  Background background_;
};

}  // namespace stoker

#endif  // STOKER_SERVER_CACHE_VOLUME_CACHE_H_
