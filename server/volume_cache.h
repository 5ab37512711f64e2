// The decoded-volume cache: chunked or compressed volumes (HDF5, NIfTI)
// decoded once, whole, and kept in RAM shared by every session, least
// recently used first out, within one budget (--volume-cache-bytes). A
// patch of a kept volume then costs a strided copy instead of a library
// read and an inflate.
//
// A volume is decoded once however many readers ask at the same time (the
// others wait for it); its decode may spread its work (chunk inflates) over
// the daemon's decode pool through the Parallel it is given. A volume that
// does not fit the whole budget is never decoded here: Get answers null and
// the caller reads it region by region (counted as oversized). A failed
// decode is returned to its waiters and not kept, so a later Get tries
// again.
//
// Entries are keyed by their caller: the key must name the file version
// (path, device, inode, size, mtime) and how it was decoded.
//
// Thread-safe.
#ifndef STOKER_SERVER_VOLUME_CACHE_H_
#define STOKER_SERVER_VOLUME_CACHE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "proto/stoker.pb.h"
#include "server/cache.h"
#include "server/single_flight.h"

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

  // The `bytes` decoded bytes of volume `key`: kept ones, else decode()'s
  // (once for concurrent callers), then kept. Null, without decoding, when
  // they could never fit the budget. decode()'s error as is.
  absl::StatusOr<Bytes> Get(const std::string& key, uint64_t bytes, const Decode& decode);

  // What is kept under `key` (something derived from a volume, such as a
  // label volume's foreground index, keyed by the volume's key and what was
  // derived): kept bytes, else make()'s (once for concurrent callers),
  // then kept when they fit. make()'s error as is.
  absl::StatusOr<Bytes> Keep(const std::string& key,
                             const std::function<absl::StatusOr<Bytes>()>& make);

  uint64_t capacity_bytes() const { return ram_.capacity_bytes(); }
  // What decodes spread their work with (also for whole reads kept
  // elsewhere, such as feature files held in RAM).
  const Parallel& parallel() const { return parallel_; }
  // Tier "volumes": hits, misses, entries, bytes, evictions, inserts.
  v1::TierStats Stats() const { return ram_.Stats(); }
  uint64_t decodes() const { return decodes_.load(std::memory_order_relaxed); }
  uint64_t oversized() const { return oversized_.load(std::memory_order_relaxed); }

 private:
  ShardedLruCache ram_;  // One shard: a volume may take the whole budget.
  const Parallel parallel_;
  SingleFlight<absl::StatusOr<Bytes>> decoding_;
  std::atomic<uint64_t> decodes_{0}, oversized_{0};
};

}  // namespace stoker

#endif  // STOKER_SERVER_VOLUME_CACHE_H_
