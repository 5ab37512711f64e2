#include "server/cache/volume_cache.h"

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

namespace stoker {

VolumeCache::VolumeCache(uint64_t capacity_bytes, Parallel parallel)
    : ram_("volumes", capacity_bytes, /*shards=*/1),
      inflight_(capacity_bytes, capacity_bytes / 2),
      parallel_(parallel ? std::move(parallel) : Parallel(&VolumeCache::Serial)) {}

namespace {

// A hit is what the caller expects or an error: never a shorter buffer a
// caller would copy past (two volumes under one key would be a bug).
absl::StatusOr<Buffer> Checked(Buffer hit, uint64_t bytes, const std::string& key) {
  if (hit == nullptr || hit->size() == bytes) return hit;
  return absl::InternalError(absl::StrCat("a cached volume holds ", hit->size(),
                                          " bytes where ", bytes, " were expected (key ",
                                          absl::CHexEscape(key), ")"));
}

}  // namespace

absl::StatusOr<Buffer> VolumeCache::Get(const std::string& key, uint64_t bytes,
                                        const Decode& decode, int64_t owner) {
  if (Buffer kept = ram_.Lookup(key)) return Checked(kept, bytes, key);
  if (!ram_.Fits(key, bytes)) {
    oversized_.fetch_add(1, std::memory_order_relaxed);
    return Buffer();
  }
  return decoding_.Do(key, [&]() -> absl::StatusOr<Buffer> {
    if (Buffer kept = ram_.Peek(key)) return Checked(kept, bytes, key);  // Decoded meanwhile.
    if (Buffer found = Unspill(key, bytes)) return found;
    // Room in flight first (given back once the volume is kept or failed).
    // Bounded: a stalled decode of another user's holds no reader thread
    // for long; past it this volume is read by region, as one too large.
    std::shared_ptr<void> room = inflight_.Wait(owner, bytes, absl::Seconds(30));
    if (room == nullptr) {
      oversized_.fetch_add(1, std::memory_order_relaxed);
      return Buffer();
    }
    // Written whole: on huge pages where allowed, a fault per 2 MiB.
    STOKER_ASSIGN_OR_RETURN(WritablePages volume, Pages(bytes, /*huge=*/true));
    STOKER_RETURN_IF_ERROR(decode(parallel_, volume.data));
    decodes_.fetch_add(1, std::memory_order_relaxed);
    ram_.Insert(key, volume.buffer);
    if (spill_.put) {
      spill_.put(key, volume.buffer);
      spilled_.fetch_add(1, std::memory_order_relaxed);
    }
    return volume.buffer;
  });
}

Buffer VolumeCache::Unspill(const std::string& key, uint64_t bytes) {
  if (!spill_.get) return nullptr;
  absl::StatusOr<WritablePages> volume = Pages(bytes, /*huge=*/true);
  if (!volume.ok() || !spill_.get(key, bytes, volume->data)) return nullptr;
  unspilled_.fetch_add(1, std::memory_order_relaxed);
  ram_.Insert(key, volume->buffer);
  return volume->buffer;
}

namespace {
enum PieceState : uint8_t { kEmpty, kFilling, kFilled };
}  // namespace

struct VolumeCache::Pieces {
  Pieces(WritablePages pages, uint64_t n)
      : pages(std::move(pages)), count(n), state(new std::atomic<uint8_t>[n]()), left(n) {}
  WritablePages pages;
  const uint64_t count;
  std::unique_ptr<std::atomic<uint8_t>[]> state;  // PieceState per piece.
  std::atomic<uint64_t> left;                     // Pieces not yet filled.
  std::atomic<bool> background{false};  // A background fill was started.
  uint64_t cursor = 0;  // The background fill's next piece (its own).
  absl::Mutex mu;
  absl::CondVar changed;  // A piece left kFilling.
};

absl::StatusOr<std::shared_ptr<VolumeCache::Pieces>> VolumeCache::FindPieces(const std::string& key,
                                                             uint64_t bytes, uint64_t pieces,
                                                             Buffer* entry) {
  absl::MutexLock lock(&pieces_mu_);
  *entry = ram_.Lookup(key);
  auto it = pieces_.find(key);
  std::shared_ptr<Pieces> v = it != pieces_.end() ? it->second.lock() : nullptr;
  if (*entry != nullptr) {
    STOKER_ASSIGN_OR_RETURN(*entry, Checked(*entry, bytes, key));
    // Kept: still being filled when it is the one in pieces_, else whole.
    if (v != nullptr && v->pages.buffer == *entry) {
      if (v->count != pieces) {
        return absl::InternalError(absl::StrCat("a cached volume has ", v->count,
                                                " pieces where ", pieces, " were expected"));
      }
      return v;
    }
    return nullptr;
  }
  if (!ram_.Fits(key, bytes)) {
    oversized_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  for (auto i = pieces_.begin(); i != pieces_.end();) {  // Forget evicted ones.
    auto next = std::next(i);
    if (i->second.expired()) pieces_.erase(i);
    i = next;
  }
  // Faulted in where pieces are filled, so on small pages: a patch's
  // chunks then fault in what they cover, not 2 MiB around each.
  STOKER_ASSIGN_OR_RETURN(WritablePages pages, Pages(bytes, /*huge=*/false));
  v = std::make_shared<Pieces>(std::move(pages), pieces);
  // The entry keeps the Pieces (and so its pages) alive while kept.
  *entry = Buffer(v, v->pages.buffer.get());
  ram_.Insert(key, *entry);
  pieces_[key] = v;
  return v;
}

absl::Status VolumeCache::FillOne(Pieces& v, uint64_t p, const FillPiece& fill) {
  absl::Status s = fill(p, v.pages.data);
  v.state[p].store(s.ok() ? kFilled : kEmpty, std::memory_order_release);
  if (s.ok()) {
    pieces_filled_.fetch_add(1, std::memory_order_relaxed);
    if (v.left.fetch_sub(1, std::memory_order_acq_rel) == 1)
      decodes_.fetch_add(1, std::memory_order_relaxed);
  }
  return s;
}

absl::Status VolumeCache::Fill(Pieces& v, const std::vector<uint64_t>& need,
                               const FillPiece& fill) {
  std::vector<uint64_t> mine;
  absl::Status first;
  for (int round = 0; round < 2; ++round) {
    mine.clear();
    for (uint64_t p : need) {
      uint8_t empty = kEmpty;
      if (v.state[p].compare_exchange_strong(empty, kFilling, std::memory_order_acquire))
        mine.push_back(p);
    }
    absl::Mutex mu;
    parallel_(mine.size(), [&](size_t j) {
      absl::Status s = FillOne(v, mine[j], fill);
      if (!s.ok()) {
        absl::MutexLock lock(&mu);
        if (first.ok()) first = s;
      }
    });
    {
      absl::MutexLock lock(&v.mu);
      if (!mine.empty()) v.changed.SignalAll();
      // Pieces another caller fills: wait for them.
      for (uint64_t p : need) {
        while (v.state[p].load(std::memory_order_acquire) == kFilling) v.changed.Wait(&v.mu);
      }
    }
    if (!first.ok()) return first;
    // A piece whose other filler failed is empty again: fill it here.
    bool all = true;
    for (uint64_t p : need) all = all && v.state[p].load(std::memory_order_acquire) == kFilled;
    if (all) return absl::OkStatus();
  }
  return absl::DataLossError("a volume's piece could not be filled");
}

absl::StatusOr<Buffer> VolumeCache::GetPieces(const std::string& key, uint64_t bytes,
                                             uint64_t pieces, const std::vector<uint64_t>& need,
                                             FillPiece fill) {
  if (spill_.get && ram_.Peek(key) == nullptr && ram_.Fits(key, bytes)) {
    // Not in RAM: whole from the spill when it is there. (A volume being
    // filled piece by piece is in RAM.)
    absl::StatusOr<Buffer> found = decoding_.Do(key, [&]() -> absl::StatusOr<Buffer> {
      if (Buffer kept = ram_.Peek(key)) return Checked(kept, bytes, key);
      return Unspill(key, bytes);
    });
    if (found.ok() && *found != nullptr) return found;
  }
  Buffer entry;
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<Pieces> v, FindPieces(key, bytes, pieces, &entry));
  if (v == nullptr) return entry;  // Whole, or null: it cannot fit.
  for (uint64_t p : need) {
    if (p >= pieces) return absl::InvalidArgumentError("a piece past the volume's");
  }
  STOKER_RETURN_IF_ERROR(Fill(*v, need, fill));
  if (v->left.load(std::memory_order_acquire) == 0) {
    Completed(key, v);
  } else if (background_ && !v->background.exchange(true)) {
    std::weak_ptr<Pieces> weak = v;
    background_([this, key, weak, fill = std::move(fill)] { FillRest(key, weak, fill); });
  }
  return entry;
}

void VolumeCache::Completed(const std::string& key, const std::shared_ptr<Pieces>& v) {
  bool mine = false;  // Whoever forgets it as being filled spills it.
  {
    absl::MutexLock lock(&pieces_mu_);
    auto it = pieces_.find(key);
    if (it != pieces_.end() && it->second.lock() == v) {
      pieces_.erase(it);
      mine = true;
    }
  }
  if (mine && spill_.put) {
    spill_.put(key, Buffer(v, v->pages.buffer.get()));
    spilled_.fetch_add(1, std::memory_order_relaxed);
  }
}

void VolumeCache::FillRest(const std::string& key, const std::weak_ptr<Pieces>& weak,
                           const FillPiece& fill) {
  std::shared_ptr<Pieces> v = weak.lock();
  if (v == nullptr) return;  // Evicted.
  // The next piece nobody has taken; ones being filled are their
  // fillers' to finish.
  uint64_t p = v->cursor;
  uint8_t empty = kEmpty;
  while (p < v->count &&
         !v->state[p].compare_exchange_strong(empty, kFilling, std::memory_order_acquire)) {
    empty = kEmpty;
    ++p;
  }
  if (p == v->count) return;
  v->cursor = p + 1;
  const absl::Status s = FillOne(*v, p, fill);
  {
    absl::MutexLock lock(&v->mu);
    v->changed.SignalAll();
  }
  if (!s.ok()) {
    // Stopped: a read that needs the piece tries it again, and the next
    // read of the volume starts the background past it.
    v->background.store(false);
    return;
  }
  background_filled_.fetch_add(1, std::memory_order_relaxed);
  if (v->left.load(std::memory_order_acquire) == 0) {
    Completed(key, v);
    return;
  }
  if (v->cursor == v->count) return;  // The rest are others' to fill.
  background_([this, key, weak, fill] { FillRest(key, weak, fill); });
}

absl::StatusOr<Buffer> VolumeCache::Keep(const std::string& key,
                                         const std::function<absl::StatusOr<Buffer>()>& make) {
  if (Buffer kept = ram_.Lookup(key)) return kept;
  return decoding_.Do(key, [&]() -> absl::StatusOr<Buffer> {
    if (Buffer kept = ram_.Peek(key)) return kept;
    absl::StatusOr<Buffer> made = make();
    if (made.ok() && *made != nullptr) ram_.Insert(key, *made);
    return made;
  });
}

}  // namespace stoker
