// A byte-budgeted, sharded LRU cache of immutable byte strings, shared by
// every session (the daemon's L1 of encoded samples, and its cache of
// decoded val outputs).
//
// Values are shared_ptr<const T> of a T with size(), the bytes charged:
// strings (ShardedLruCache), or Buffers' views (util/buffer.h, the
// volume cache). A lookup hands out a reference,
// so an entry evicted while a reader still uses it stays alive until that
// reader is done. Keys hash to one of `shards` (default 16), each with its
// own mutex; the budget is the whole cache's, not a shard's: a set of
// values that fits the capacity stays whole however the keys spread. Over
// budget, the least recently used entry of all is evicted: each shard
// publishes its oldest entry's recency tick, read without locks, and only
// the victim's shard is locked. A value larger than `largest_bytes`
// (default capacity/shards) is not cached, so one value never flushes the
// cache. Thread-safe; counters are relaxed atomics.
#ifndef STOKER_SERVER_CACHE_CACHE_H_
#define STOKER_SERVER_CACHE_CACHE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "proto/stoker.pb.h"

namespace stoker {

using Bytes = std::shared_ptr<const std::string>;

template <typename T>
class LruCache {
 public:
  using Value = std::shared_ptr<const T>;

  // `largest_bytes` 0: capacity / shards.
  LruCache(std::string tier_name, uint64_t capacity_bytes, int shards = 16,
           uint64_t largest_bytes = 0);

  // What an entry is charged beyond its key and value (the bookkeeping):
  // the one figure every estimate of the cache's bytes uses.
  static constexpr uint64_t kEntryOverhead = 64;

  // The value, refreshed as most recently used unless !refresh (counted
  // either way); nullptr on a miss.
  Value Lookup(const std::string& key, bool refresh = true);
  // The value, neither counted as a lookup nor refreshed; nullptr if absent.
  Value Peek(const std::string& key);
  // Inserts or replaces, then evicts the least recently used entries of
  // all shards while the cache is over its budget.
  void Insert(const std::string& key, Value value);
  void Erase(const std::string& key);

  uint64_t capacity_bytes() const { return capacity_; }
  // Whether a value of `bytes` under `key` could be cached at all.
  bool Fits(const std::string& key, uint64_t bytes) const {
    return key.size() + bytes + kEntryOverhead <= largest_;
  }
  // Hits, misses, entries, bytes, evictions, inserts.
  v1::TierStats Stats() const;

 private:
  struct Entry {
    std::string key;
    Value value;
    uint64_t tick = 0;  // When last inserted or looked up.
  };
  struct Shard {
    absl::Mutex mu;
    std::list<Entry> lru ABSL_GUARDED_BY(mu);  // Front = most recent.
    absl::flat_hash_map<std::string, typename std::list<Entry>::iterator> index
        ABSL_GUARDED_BY(mu);
    // lru.back()'s tick (UINT64_MAX when empty), kept under mu by
    // Published and read without it by EvictOverBudget.
    std::atomic<uint64_t> oldest{UINT64_MAX};
    void Published() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      oldest.store(lru.empty() ? UINT64_MAX : lru.back().tick, std::memory_order_relaxed);
    }
  };
  Shard& ShardFor(const std::string& key);
  // Evicts the least recently used entries of all shards until the cache
  // is within its budget. Called holding no shard's lock.
  void EvictOverBudget();
  static uint64_t Charge(const Entry& e) {
    return e.key.size() + e.value->size() + kEntryOverhead;
  }

  const std::string tier_;
  const uint64_t capacity_;
  const uint64_t largest_;  // The largest entry cached.
  std::vector<Shard> shards_;
  std::atomic<uint64_t> bytes_{0};  // Of all shards.
  std::atomic<uint64_t> clock_{0};  // Recency ticks.
  std::atomic<uint64_t> hits_{0}, misses_{0}, evictions_{0}, inserts_{0};
};

extern template class LruCache<std::string>;
extern template class LruCache<std::string_view>;

// Of strings (Bytes).
using ShardedLruCache = LruCache<std::string>;

}  // namespace stoker

#endif  // STOKER_SERVER_CACHE_CACHE_H_
