// Which of a partition's samples an epoch's exchange sends to another
// partition (CanonicalOrder), weighed by bytes when the dataset knows its
// samples' sizes without reading them (a listing's: ListedBytes in sample_source.h),
// so that the bytes a node reads in other nodes' place stay within the
// exchange fraction of its share, not only their count.
//
// The partition's draw for the epoch (a permutation of its slots) is walked
// from its start: a sample is exported if the exported samples' bytes, with
// it, stay within the dataset's mean sample size times their count, and is
// kept otherwise; the walk ends once `exported` samples are taken. So a
// partition never exports more than `exported` x the mean in bytes, and a
// node whose partitions each read `exported` samples of others' reads at
// most that many mean-sized samples' bytes. A partition without enough
// samples light enough (most of its samples above the mean) makes up the
// count with the lightest it passed over: the one case the bound does not
// hold (ExchangeSplit::over_budget). Sizes are taken up to 1 TiB each (no
// sum or product overflows). Without sizes, or with all of them 0, a split
// is the draw's first `exported`: the exchange by count. A sample much
// larger than the mean is seldom exported: it stays in its partition (with
// a world size dividing C, on its rank) more often than others.
//
// Deterministic: a function of the sizes and the draw, the same in every
// process that listed the same sizes. ExchangeSplits sums the sizes once
// (one lookup a sample: on a thread of its own from SumInBackground, which
// a first epoch's reading hides), computes each (epoch, partition)'s split
// on first use and keeps the two latest epochs' (a caller further behind
// makes its split again at each use). Thread-safe.
#ifndef STOKER_SERVER_SERVE_EXCHANGE_SPLIT_H_
#define STOKER_SERVER_SERVE_EXCHANGE_SPLIT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace stoker {

// One partition's split, by positions in its draw.
struct ExchangeSplit {
  std::vector<uint32_t> exported;  // The positions exported, in walk order.
  std::vector<uint32_t> passed;    // Those the walk kept, before `walked`.
  uint64_t walked = 0;             // Every position from here on is kept.
  bool over_budget = false;        // The count was made up past the bound.

  // The position of exported sample j < exported.size().
  uint64_t Exported(uint64_t j) const { return exported[j]; }
  // The position of kept sample i < the partition's size - exported.size().
  uint64_t Kept(uint64_t i) const {
    return i < passed.size() ? passed[i] : walked + (i - passed.size());
  }
};

// The largest size a sample is weighed at.
inline constexpr uint64_t kMostWeighedBytes = uint64_t{1} << 40;

// The split of a partition of `size` samples exporting `exported` <= size,
// where `bytes_at(j)` is the bytes of the sample at draw position j, and
// the mean sample size is `total` / `count` (count > 0): sizes at most
// kMostWeighedBytes, count below 2^40.
ExchangeSplit SplitByBytes(uint64_t size, uint64_t exported, unsigned __int128 total,
                           uint64_t count, const std::function<uint64_t(uint64_t)>& bytes_at);

class ExchangeSplits {
 public:
  // A sample's bytes (0 where unknown).
  using SampleBytes = std::function<uint64_t(uint64_t sample)>;
  ExchangeSplits(SampleBytes bytes, uint64_t num_samples);
  // Stops a sum still under way.
  ~ExchangeSplits();
  ExchangeSplits(const ExchangeSplits&) = delete;
  ExchangeSplits& operator=(const ExchangeSplits&) = delete;

  // Begins summing the sizes on a thread of its own (inline at the first
  // ByBytes if none could start).
  void SumInBackground();
  // Whether splits weigh bytes: sizes given, summing to more than 0 (waits
  // for the sum; a split by bytes of samples all of size 0 would be the
  // split by count).
  bool ByBytes();

  // Partition `partition` of `epoch`: `size` samples, `sample_at(j)` the
  // sample at its draw's position j; `exported` of them leave. ByBytes()
  // must be true.
  std::shared_ptr<const ExchangeSplit> Get(uint64_t epoch, uint64_t partition, uint64_t size,
                                           uint64_t exported,
                                           const std::function<uint64_t(uint64_t)>& sample_at);

 private:
  void Sum();

  const SampleBytes bytes_;
  const uint64_t n_;
  std::atomic<bool> stop_{false}, ready_{false};
  absl::Mutex sum_mu_;  // Waits for, or makes, the sum.
  std::thread summing_ ABSL_GUARDED_BY(sum_mu_);
  // Written once before ready_ is set.
  unsigned __int128 total_ = 0;
  bool by_bytes_ = false;
  absl::Mutex mu_;
  std::map<std::pair<uint64_t, uint64_t>, std::shared_ptr<const ExchangeSplit>> splits_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_SERVER_SERVE_EXCHANGE_SPLIT_H_
