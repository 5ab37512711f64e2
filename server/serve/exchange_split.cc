#include "server/serve/exchange_split.h"

#include <algorithm>
#include <system_error>

namespace stoker {

ExchangeSplit SplitByBytes(uint64_t size, uint64_t exported, unsigned __int128 total,
                           uint64_t count, const std::function<uint64_t(uint64_t)>& bytes_at) {
  ExchangeSplit s;
  s.exported.reserve(exported);
  std::vector<uint64_t> passed_bytes;
  unsigned __int128 taken_bytes = 0;
  uint64_t j = 0;
  for (; j < size && s.exported.size() < exported; ++j) {
    const uint64_t b = std::min(bytes_at(j), kMostWeighedBytes);
    // Within the mean times the count taken, with it: (taken + b) / (k + 1)
    // <= total / count, in integers.
    const unsigned __int128 with = taken_bytes + b;
    if (with * count <= static_cast<unsigned __int128>(s.exported.size() + 1) * total) {
      s.exported.push_back(static_cast<uint32_t>(j));
      taken_bytes = with;
    } else {
      s.passed.push_back(static_cast<uint32_t>(j));
      passed_bytes.push_back(b);
    }
  }
  s.walked = j;
  if (s.exported.size() < exported) {
    // The whole draw walked: the lightest passed over make up the count.
    s.over_budget = true;
    std::vector<size_t> by_weight(s.passed.size());
    for (size_t i = 0; i < by_weight.size(); ++i) by_weight[i] = i;
    std::stable_sort(by_weight.begin(), by_weight.end(),
                     [&](size_t a, size_t b) { return passed_bytes[a] < passed_bytes[b]; });
    std::vector<bool> taken(s.passed.size(), false);
    for (size_t i = 0; s.exported.size() < exported; ++i) {
      taken[by_weight[i]] = true;
      s.exported.push_back(s.passed[by_weight[i]]);
    }
    std::vector<uint32_t> kept;
    for (size_t i = 0; i < s.passed.size(); ++i) {
      if (!taken[i]) kept.push_back(s.passed[i]);
    }
    s.passed = std::move(kept);
  }
  return s;
}

ExchangeSplits::ExchangeSplits(SampleBytes bytes, uint64_t num_samples)
    : bytes_(std::move(bytes)), n_(num_samples) {}

ExchangeSplits::~ExchangeSplits() {
  stop_.store(true, std::memory_order_relaxed);
  absl::MutexLock lock(&sum_mu_);
  if (summing_.joinable()) summing_.join();
}

void ExchangeSplits::SumInBackground() {
  absl::MutexLock lock(&sum_mu_);
  if (ready_.load(std::memory_order_acquire) || summing_.joinable()) return;
  try {
    summing_ = std::thread([this] { Sum(); });
  } catch (const std::system_error&) {
    // No thread to spare: ByBytes sums.
  }
}

void ExchangeSplits::Sum() {
  // At most 2^40 samples of at most 2^40 bytes: 2^80 in all.
  if (!bytes_ || n_ == 0 || n_ >= kMostWeighedBytes) return;
  unsigned __int128 total = 0;
  try {
    for (uint64_t i = 0; i < n_; ++i) {
      if (i % 4096 == 0 && stop_.load(std::memory_order_relaxed)) return;
      total += std::min(bytes_(i), kMostWeighedBytes);
    }
  } catch (const std::exception&) {
    return;  // (Out of memory in a lookup: by count.)
  }
  total_ = total;
  by_bytes_ = total > 0;
}

bool ExchangeSplits::ByBytes() {
  if (ready_.load(std::memory_order_acquire)) return by_bytes_;
  absl::MutexLock lock(&sum_mu_);
  if (!ready_.load(std::memory_order_relaxed)) {
    if (summing_.joinable()) {
      summing_.join();
    } else {
      Sum();
    }
    ready_.store(true, std::memory_order_release);
  }
  return by_bytes_;
}

std::shared_ptr<const ExchangeSplit> ExchangeSplits::Get(
    uint64_t epoch, uint64_t partition, uint64_t size, uint64_t exported,
    const std::function<uint64_t(uint64_t)>& sample_at) {
  const std::pair<uint64_t, uint64_t> key{epoch, partition};
  {
    absl::MutexLock lock(&mu_);
    auto it = splits_.find(key);
    if (it != splits_.end()) return it->second;
  }
  // Made outside the lock (two threads may both make it: the same split).
  auto split = std::make_shared<const ExchangeSplit>(
      SplitByBytes(size, exported, total_, n_, [&](uint64_t j) { return bytes_(sample_at(j)); }));
  absl::MutexLock lock(&mu_);
  std::shared_ptr<const ExchangeSplit> out = splits_.emplace(key, split).first->second;
  // Keeps the latest two epochs' splits.
  const uint64_t latest = splits_.rbegin()->first.first;
  while (splits_.begin()->first.first + 1 < latest) splits_.erase(splits_.begin());
  return out;
}

}  // namespace stoker
