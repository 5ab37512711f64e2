#include "server/serve/canonical_order.h"

#include <algorithm>
#include <cmath>

namespace stoker {
namespace {

constexpr uint64_t kPlace = 0x504c414345ULL;      // "PLACE"
constexpr uint64_t kPartition = 0x5041525431ULL;  // "PART1"
constexpr uint64_t kExport = 0x4558504f5254ULL;   // "EXPORT"
constexpr uint64_t kPairing = 0x50414952ULL;      // "PAIR"

}  // namespace

uint32_t CanonicalOrder::PartitionsFor(uint64_t num_samples, uint32_t partitions) {
  if (partitions == 0) partitions = kDefaultPartitions;
  for (uint32_t c = partitions; c > 1; --c) {
    if (partitions % c == 0 && num_samples / c >= kLeastPerPartition) return c;
  }
  return 1;
}

CanonicalOrder::CanonicalOrder(uint64_t num_samples, uint64_t seed, uint32_t partitions,
                               float exchange)
    : n_(num_samples),
      seed_(seed),
      partitions_(PartitionsFor(num_samples, partitions)),
      placement_(num_samples, MixSeed({seed, kPlace})) {
  per_ = n_ / partitions_;
  rem_ = n_ % partitions_;
  if (partitions_ > 1 && exchange > 0) {
    exchanged_ = std::min<uint64_t>(
        per_, static_cast<uint64_t>(std::llround(static_cast<double>(exchange) *
                                                 static_cast<double>(per_))));
  }
}

uint64_t CanonicalOrder::First(uint64_t p) const { return p * per_ + std::min(p, rem_); }

uint64_t CanonicalOrder::Size(uint64_t p) const { return per_ + (p < rem_ ? 1 : 0); }

uint32_t CanonicalOrder::PartitionAt(uint64_t position) const {
  // Rounds 0 .. per_ - 1 visit every partition; round per_ the first rem_.
  const uint64_t full = per_ * partitions_;
  return static_cast<uint32_t>(position < full ? position % partitions_ : position - full);
}

uint64_t CanonicalOrder::At(uint64_t epoch, uint64_t position) const {
  const Slot s = Locate(epoch, position);
  return placement_.At(First(s.partition) + s.slot);
}

uint32_t CanonicalOrder::HomeAt(uint64_t epoch, uint64_t position) const {
  return static_cast<uint32_t>(Locate(epoch, position).partition);
}

uint64_t CanonicalOrder::At(uint64_t epoch, uint64_t position, uint32_t* home) const {
  const Slot s = Locate(epoch, position);
  *home = static_cast<uint32_t>(s.partition);
  return placement_.At(First(s.partition) + s.slot);
}

CanonicalOrder::Slot CanonicalOrder::Locate(uint64_t epoch, uint64_t position) const {
  const uint64_t full = per_ * partitions_;
  const uint64_t p = PartitionAt(position);
  const uint64_t round = position < full ? position / partitions_ : per_;
  const uint64_t size = Size(p);
  const uint64_t k = IndexPermutation(size, MixSeed({seed_, epoch, kPartition, p})).At(round);
  // Epoch 0 exchanges nothing: a node's first epoch reads (and caches) its
  // own share, which later epochs' exchanges then leave in place.
  if (exchanged_ == 0 || epoch == 0) return {p, k};
  // The epoch's draw of p's slots: the first exchanged_ are read by the
  // partition the epoch's permutation points at p, the rest stay; p reads
  // its own that stay, then the first exchanged_ of the partition the
  // permutation gives it.
  const uint64_t stay = size - exchanged_;
  const auto draw = [&](uint64_t q) {
    return IndexPermutation(Size(q), MixSeed({seed_, epoch, kExport, q}));
  };
  if (k < stay) return {p, draw(p).At(exchanged_ + k)};
  const uint64_t from =
      IndexPermutation(partitions_, MixSeed({seed_, epoch, kPairing})).At(p);
  return {from, draw(from).At(k - stay)};
}

}  // namespace stoker
