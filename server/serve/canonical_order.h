// A shuffled epoch's order of samples that no world size changes: a pure
// function of (seed, epoch, the dataset's size, the canonical partition
// count C, the exchange Q, and the samples' listed sizes where the
// exchange weighs them). Every world size draws from the same sequence, so
// a run resumed at another world size continues it where it stopped.
//
// The samples are placed once per run (per seed, never per epoch) into C
// partitions of equal size (±1): a keyed permutation of [0, N) cut into C
// ranges. An epoch visits the partitions round-robin, partition p at
// positions p, p + C, p + 2C, ..., and within each partition draws its own
// permutation of (seed, epoch, p). So when the world size W divides C,
// rank r (positions r, r + W, ...) reads only the partitions p = r mod W in
// every epoch, and a node's ranks only its own partitions: a node caches
// its share, not the whole dataset.
//
// The exchange fraction Q mixes partitions across epochs: each epoch after
// epoch 0 (which reads every partition's own samples, so a node first
// caches its own share) draws a permutation of the partitions, and
// partition p reads E of partition pi(p)'s samples (a new draw each
// epoch) in place of E of its own, which pi^-1(p) reads; E = round(Q x
// floor(N / C)) (so 1 of 16 for Q = 0.05). Every sample is still read once
// per epoch, and a partition may draw itself. A node then reads at most E
// x its partitions of other nodes' samples, about (nodes - 1) / nodes of
// that. Q = 0: no exchange, the same share every epoch. Given the samples'
// sizes (a listing's), the E a partition gives are drawn within E x the
// mean sample size in bytes (exchange_split.h), so a node's bytes read in
// others' place are within E x its partitions mean-sized samples too (Q
// x its share where E = Q x N / C), not only their count.
//
// C in effect is the largest divisor of the one asked for that leaves each
// partition kLeastPerPartition samples, and 1 for datasets smaller than
// that: every epoch still permutes the samples within partitions of some
// size. Each position costs a few hashes and no memory: 10^12 samples cost
// nothing up front; an exchange weighed by bytes sums the sizes once (in
// the background from construction) and keeps its splits of two epochs
// (8 x Q x N bytes, and 8 a sample passed over: more for partitions past
// the bound). Logically immutable; thread-safe.
#ifndef STOKER_SERVER_SERVE_CANONICAL_ORDER_H_
#define STOKER_SERVER_SERVE_CANONICAL_ORDER_H_

#include <cstdint>
#include <memory>

#include "server/serve/exchange_split.h"
#include "util/permutation.h"

namespace stoker {

class CanonicalOrder {
 public:
  static constexpr uint64_t kLeastPerPartition = 16;

  // `partitions`: C asked for (0 and 1: one); `exchange` in [0, 1]; `bytes`
  // (may be empty): each sample's size, to weigh the exchange by. The
  // session's defaults are the schema's (SessionSpec.partitions, exchange).
  CanonicalOrder(uint64_t num_samples, uint64_t seed, uint32_t partitions, float exchange,
                 ExchangeSplits::SampleBytes bytes = nullptr);

  // C in effect (at least 1).
  uint32_t partitions() const { return partitions_; }
  uint64_t size() const { return n_; }
  // Samples each partition gives another one per epoch.
  uint64_t exchanged() const { return exchanged_; }
  // Whether the exchange is weighed by bytes (sizes given, all known;
  // waits for their sum), and how many partitions' exchange in `epoch`
  // went past E x the mean (makes every partition's split of it).
  bool ExchangeByBytes() const;
  uint32_t ExchangeOverBudget(uint64_t epoch) const;

  // The sample at `position` < size() of `epoch`.
  uint64_t At(uint64_t epoch, uint64_t position) const;
  // The partition whose sample is at `position`.
  uint32_t PartitionAt(uint64_t position) const;
  // The partition the sample at `position` of `epoch` was placed in: that
  // one's own, or, for a sample read in another's place, the one it came
  // from; with the sample itself, for the cost of one.
  uint32_t HomeAt(uint64_t epoch, uint64_t position) const;
  uint64_t At(uint64_t epoch, uint64_t position, uint32_t* home) const;

  // The C in effect for `num_samples` when `partitions` are asked for.
  static uint32_t PartitionsFor(uint64_t num_samples, uint32_t partitions);

 private:
  uint64_t n_;
  uint64_t seed_;
  uint32_t partitions_;
  // Partition p's slots [first, first + size) in placement order.
  uint64_t First(uint64_t p) const;
  uint64_t Size(uint64_t p) const;
  // The partition and its slot (from First) holding the sample at
  // `position` of `epoch`.
  struct Slot {
    uint64_t partition, slot;
  };
  Slot Locate(uint64_t epoch, uint64_t position) const;
  // Partition q's draw of `epoch`, and its split when weighed by bytes.
  IndexPermutation Draw(uint64_t epoch, uint64_t q) const;
  std::shared_ptr<const ExchangeSplit> Split(uint64_t epoch, uint64_t q,
                                             const IndexPermutation& draw) const;

  uint64_t per_ = 0;    // Samples in each partition (the first rem_ hold one more).
  uint64_t rem_ = 0;
  uint64_t exchanged_ = 0;
  IndexPermutation placement_;
  // With sizes and an exchange (shared by copies: the same splits).
  std::shared_ptr<ExchangeSplits> splits_;
};

}  // namespace stoker

#endif  // STOKER_SERVER_SERVE_CANONICAL_ORDER_H_
