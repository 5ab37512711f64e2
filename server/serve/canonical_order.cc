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
  for (uint32_t c = partitions; c > 1; --c) {
    if (partitions % c == 0 && num_samples / c >= kLeastPerPartition) return c;
  }
  return 1;
}

CanonicalOrder::CanonicalOrder(uint64_t num_samples, uint64_t seed, uint32_t partitions,
                               float exchange, ExchangeSplits::SampleBytes bytes)
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
  // A split names positions in 32 bits: partitions of 2^32 samples or more
  // (never a dataset whose sizes are listed in RAM) exchange by count.
  if (exchanged_ > 0 && bytes && per_ < UINT32_MAX) {
    splits_ = std::make_shared<ExchangeSplits>(std::move(bytes), n_);
    splits_->SumInBackground();
  }
}

bool CanonicalOrder::ExchangeByBytes() const {
  return splits_ != nullptr && splits_->ByBytes();
}

uint32_t CanonicalOrder::ExchangeOverBudget(uint64_t epoch) const {
  if (epoch == 0 || !ExchangeByBytes()) return 0;
  uint32_t over = 0;
  for (uint64_t q = 0; q < partitions_; ++q) over += Split(epoch, q, Draw(epoch, q))->over_budget;
  return over;
}

IndexPermutation CanonicalOrder::Draw(uint64_t epoch, uint64_t q) const {
  return IndexPermutation(Size(q), MixSeed({seed_, epoch, kExport, q}));
}

std::shared_ptr<const ExchangeSplit> CanonicalOrder::Split(uint64_t epoch, uint64_t q,
                                                           const IndexPermutation& draw) const {
  return splits_->Get(epoch, q, Size(q), exchanged_,
                      [&](uint64_t j) { return placement_.At(First(q) + draw.At(j)); });
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
  const uint64_t from =
      k < stay ? p : IndexPermutation(partitions_, MixSeed({seed_, epoch, kPairing})).At(p);
  const IndexPermutation d = Draw(epoch, from);
  if (!ExchangeByBytes()) return {from, d.At(k < stay ? exchanged_ + k : k - stay)};
  // Weighed by bytes: the split names the draw's positions exported.
  const std::shared_ptr<const ExchangeSplit> split = Split(epoch, from, d);
  return {from, d.At(k < stay ? split->Kept(k) : split->Exported(k - stay))};
}

}  // namespace stoker
