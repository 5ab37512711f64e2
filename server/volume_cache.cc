#include "server/volume_cache.h"

#include <sys/mman.h>

#include <cstdint>
#include <memory>
#include <utility>

namespace stoker {
namespace {

// Asks for transparent huge pages over the 2 MiB pages inside [p, p + n).
void AdviseHugePages(char* p, size_t n) {
  constexpr uintptr_t kHuge = 2 << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

}  // namespace

VolumeCache::VolumeCache(uint64_t capacity_bytes, Parallel parallel)
    : ram_("volumes", capacity_bytes, /*shards=*/1),
      parallel_(parallel ? std::move(parallel) : Parallel(&VolumeCache::Serial)) {}

absl::StatusOr<Bytes> VolumeCache::Get(const std::string& key, uint64_t bytes,
                                       const Decode& decode) {
  if (Bytes kept = ram_.Lookup(key)) return kept;
  if (!ram_.Fits(key, bytes)) {
    oversized_.fetch_add(1, std::memory_order_relaxed);
    return Bytes();
  }
  return decoding_.Do(key, [&]() -> absl::StatusOr<Bytes> {
    if (Bytes kept = ram_.Peek(key)) return kept;  // Decoded meanwhile.
    auto volume = std::make_shared<std::string>();
    volume->reserve(bytes);  // Untouched pages, then on huge pages where allowed:
    AdviseHugePages(volume->data(), bytes);  // a 2 MiB fault, not 512 of 4 KiB.
    volume->resize(bytes);
    absl::Status s = decode(parallel_, reinterpret_cast<uint8_t*>(volume->data()));
    if (!s.ok()) return s;
    decodes_.fetch_add(1, std::memory_order_relaxed);
    Bytes entry = std::move(volume);
    ram_.Insert(key, entry);
    return entry;
  });
}

absl::StatusOr<Bytes> VolumeCache::Keep(const std::string& key,
                                        const std::function<absl::StatusOr<Bytes>()>& make) {
  if (Bytes kept = ram_.Lookup(key)) return kept;
  return decoding_.Do(key, [&]() -> absl::StatusOr<Bytes> {
    if (Bytes kept = ram_.Peek(key)) return kept;
    absl::StatusOr<Bytes> made = make();
    if (made.ok() && *made != nullptr) ram_.Insert(key, *made);
    return made;
  });
}

}  // namespace stoker
