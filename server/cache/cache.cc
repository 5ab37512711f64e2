#include "server/cache/cache.h"

#include <algorithm>
#include <cstdint>

#include "absl/hash/hash.h"

namespace stoker {

template <typename T>
LruCache<T>::LruCache(std::string tier_name, uint64_t capacity_bytes, int shards,
                      uint64_t largest_bytes)
    : tier_(std::move(tier_name)),
      capacity_(capacity_bytes),
      largest_(largest_bytes > 0 ? std::min(largest_bytes, capacity_bytes)
                                 : capacity_bytes / std::max(shards, 1)),
      shards_(std::max(shards, 1)) {}

template <typename T>
typename LruCache<T>::Shard& LruCache<T>::ShardFor(const std::string& key) {
  return shards_[absl::Hash<std::string>{}(key) % shards_.size()];
}

template <typename T>
typename LruCache<T>::Value LruCache<T>::Lookup(const std::string& key, bool refresh) {
  if (capacity_ == 0) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  Shard& s = ShardFor(key);
  absl::MutexLock lock(&s.mu);
  auto it = s.index.find(key);
  if (it == s.index.end()) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  if (refresh) {
    s.lru.splice(s.lru.begin(), s.lru, it->second);
    it->second->tick = clock_.fetch_add(1, std::memory_order_relaxed);
    s.Published();
  }
  hits_.fetch_add(1, std::memory_order_relaxed);
  return it->second->value;
}

template <typename T>
typename LruCache<T>::Value LruCache<T>::Peek(const std::string& key) {
  Shard& s = ShardFor(key);
  absl::MutexLock lock(&s.mu);
  auto it = s.index.find(key);
  return it == s.index.end() ? nullptr : it->second->value;
}

template <typename T>
void LruCache<T>::Insert(const std::string& key, Value value) {
  Entry e{key, std::move(value), clock_.fetch_add(1, std::memory_order_relaxed)};
  const uint64_t charge = Charge(e);
  if (charge > largest_) return;
  {
    Shard& s = ShardFor(key);
    absl::MutexLock lock(&s.mu);
    if (auto it = s.index.find(key); it != s.index.end()) {
      bytes_.fetch_sub(Charge(*it->second), std::memory_order_relaxed);
      s.lru.erase(it->second);
      s.index.erase(it);
    }
    s.lru.push_front(std::move(e));
    s.index[key] = s.lru.begin();
    s.Published();
    bytes_.fetch_add(charge, std::memory_order_relaxed);
    inserts_.fetch_add(1, std::memory_order_relaxed);
  }
  EvictOverBudget();
}

template <typename T>
void LruCache<T>::EvictOverBudget() {
  while (bytes_.load(std::memory_order_relaxed) > capacity_) {
    // The shard whose least recently used entry is the oldest, from the
    // ticks each shard publishes: only the victim's shard is locked.
    Shard* oldest = nullptr;
    uint64_t tick = UINT64_MAX;
    for (Shard& s : shards_) {
      const uint64_t t = s.oldest.load(std::memory_order_relaxed);
      if (t < tick) {
        tick = t;
        oldest = &s;
      }
    }
    if (oldest == nullptr) return;
    absl::MutexLock lock(&oldest->mu);
    if (oldest->lru.empty()) continue;  // Emptied meanwhile: look again.
    const Entry& victim = oldest->lru.back();
    bytes_.fetch_sub(Charge(victim), std::memory_order_relaxed);
    oldest->index.erase(victim.key);
    oldest->lru.pop_back();
    oldest->Published();
    evictions_.fetch_add(1, std::memory_order_relaxed);
  }
}

template <typename T>
void LruCache<T>::Erase(const std::string& key) {
  Shard& s = ShardFor(key);
  absl::MutexLock lock(&s.mu);
  auto it = s.index.find(key);
  if (it == s.index.end()) return;
  bytes_.fetch_sub(Charge(*it->second), std::memory_order_relaxed);
  s.lru.erase(it->second);
  s.index.erase(it);
  s.Published();
}

template <typename T>
v1::TierStats LruCache<T>::Stats() const {
  v1::TierStats t;
  t.set_tier(tier_);
  t.set_enabled(capacity_ > 0);
  t.set_hits(hits_.load(std::memory_order_relaxed));
  t.set_misses(misses_.load(std::memory_order_relaxed));
  t.set_evictions(evictions_.load(std::memory_order_relaxed));
  t.set_inserts(inserts_.load(std::memory_order_relaxed));
  t.set_capacity_bytes(capacity_);
  uint64_t entries = 0;
  for (const Shard& s : shards_) {
    absl::MutexLock lock(const_cast<absl::Mutex*>(&s.mu));
    entries += s.index.size();
  }
  t.set_bytes(bytes_.load(std::memory_order_relaxed));
  t.set_entries(entries);
  return t;
}

template class LruCache<std::string>;
template class LruCache<std::string_view>;

}  // namespace stoker
