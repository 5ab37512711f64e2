#include "server/serve/canonical_order.h"

namespace stoker {
namespace {

constexpr uint64_t kPlace = 0x504c414345ULL;      // "PLACE"
constexpr uint64_t kPartition = 0x5041525431ULL;  // "PART1"

}  // namespace

uint32_t CanonicalOrder::PartitionsFor(uint64_t num_samples, uint32_t partitions) {
  if (partitions == 0) partitions = kDefaultPartitions;
  for (uint32_t c = partitions; c > 1; --c) {
    if (partitions % c == 0 && num_samples / c >= kLeastPerPartition) return c;
  }
  return 1;
}

CanonicalOrder::CanonicalOrder(uint64_t num_samples, uint64_t seed, uint32_t partitions)
    : n_(num_samples),
      seed_(seed),
      partitions_(PartitionsFor(num_samples, partitions)),
      placement_(num_samples, MixSeed({seed, kPlace})) {
  per_ = n_ / partitions_;
  rem_ = n_ % partitions_;
}

uint32_t CanonicalOrder::PartitionAt(uint64_t position) const {
  // Rounds 0 .. per_ - 1 visit every partition; round per_ the first rem_.
  const uint64_t full = per_ * partitions_;
  return static_cast<uint32_t>(position < full ? position % partitions_ : position - full);
}

uint64_t CanonicalOrder::At(uint64_t epoch, uint64_t position) const {
  const uint64_t full = per_ * partitions_;
  const uint64_t p = PartitionAt(position);
  const uint64_t round = position < full ? position / partitions_ : per_;
  const uint64_t size = per_ + (p < rem_ ? 1 : 0);
  const uint64_t first = p * per_ + (p < rem_ ? p : rem_);
  const IndexPermutation within(size, MixSeed({seed_, epoch, kPartition, p}));
  return placement_.At(first + within.At(round));
}

}  // namespace stoker
