#include "server/cache/cache.h"

#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

Bytes Value(size_t n, char c = 'x') {
  return std::make_shared<const std::string>(n, c);
}

TEST(ShardedLruCacheTest, HitsMissesAndReplacement) {
  ShardedLruCache c("l1", 16 << 20);
  EXPECT_EQ(c.Lookup("a"), nullptr);
  c.Insert("a", Value(100, 'a'));
  Bytes v = c.Lookup("a");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(*v, std::string(100, 'a'));
  c.Insert("a", Value(50, 'b'));
  EXPECT_EQ(*c.Lookup("a"), std::string(50, 'b'));
  c.Erase("a");
  EXPECT_EQ(c.Lookup("a"), nullptr);
  v1::TierStats s = c.Stats();
  EXPECT_EQ(s.tier(), "l1");
  EXPECT_TRUE(s.enabled());
  EXPECT_EQ(s.hits(), 2u);
  EXPECT_EQ(s.misses(), 2u);
  EXPECT_EQ(s.inserts(), 2u);
  EXPECT_EQ(s.entries(), 0u);
  EXPECT_EQ(s.bytes(), 0u);
}

TEST(ShardedLruCacheTest, StaysWithinBudgetEvictingLeastRecentlyUsed) {
  // 1 MiB over 16 shards; 1000 values of 10 KB cannot all fit.
  ShardedLruCache c("l1", 16 * 65536);
  for (int i = 0; i < 1000; ++i) c.Insert(absl::StrCat("k", i), Value(10000));
  v1::TierStats s = c.Stats();
  EXPECT_LE(s.bytes(), 16u * 65536u);
  EXPECT_EQ(s.entries() + s.evictions(), 1000u);
  EXPECT_GT(s.evictions(), 800u);
  // The most recent inserts survive, whatever their shards; the first are
  // gone.
  for (int i = 990; i < 1000; ++i) EXPECT_NE(c.Lookup(absl::StrCat("k", i)), nullptr) << i;
  EXPECT_EQ(c.Lookup("k0"), nullptr);
}

// The budget is the whole cache's: values filling 95% of it stay, however
// unevenly their keys fall into the shards (a per-shard budget would evict
// in the fullest shards).
TEST(ShardedLruCacheTest, ASetThatFitsTheCapacityStaysWhole) {
  constexpr int kValues = 64;
  constexpr uint64_t kValue = 20000;
  ShardedLruCache c("pixels", kValues * (kValue + 64 + 8) * 100 / 95);
  for (int i = 0; i < kValues; ++i) c.Insert(absl::StrCat("p", i), Value(kValue));
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < kValues; ++i) {
      EXPECT_NE(c.Lookup(absl::StrCat("p", i)), nullptr) << i;
    }
  }
  EXPECT_EQ(c.Stats().evictions(), 0u);
  EXPECT_EQ(c.Stats().entries(), uint64_t{kValues});
}

TEST(ShardedLruCacheTest, LookupRefreshesRecency) {
  // Room for about 34 values of 1000 bytes: the 200 fillers would evict
  // "keep" were lookups not refreshing it.
  ShardedLruCache c("l1", 16 * 2300);
  c.Insert("keep", Value(1000));
  for (int i = 0; i < 200; ++i) {
    ASSERT_NE(c.Lookup("keep"), nullptr) << "evicted although just used";
    c.Insert(absl::StrCat("f", i), Value(1000));
  }
  EXPECT_GT(c.Stats().evictions(), 150u);
}

TEST(ShardedLruCacheTest, TooLargeValuesAndZeroCapacityAreNotCached) {
  ShardedLruCache c("l1", 16 * 1000);
  c.Insert("big", Value(5000));  // Over capacity/shards: one value never flushes it.
  EXPECT_EQ(c.Lookup("big"), nullptr);
  EXPECT_FALSE(c.Fits("big", 5000));
  EXPECT_TRUE(c.Fits("big", 900));
  LruCache<std::string> one("volumes", 16 * 1000, 1);  // One shard: up to it all.
  one.Insert("big", Value(5000));
  EXPECT_NE(one.Lookup("big"), nullptr);
  ShardedLruCache off("decoded", 0);
  off.Insert("a", Value(1));
  EXPECT_EQ(off.Lookup("a"), nullptr);
  EXPECT_FALSE(off.Stats().enabled());
}

TEST(ShardedLruCacheTest, EvictedValueStaysValidForItsHolder) {
  ShardedLruCache c("l1", 16 * 2000);
  c.Insert("a", Value(1500, 'q'));
  Bytes held = c.Lookup("a");
  c.Erase("a");
  EXPECT_EQ(*held, std::string(1500, 'q'));
}

TEST(ShardedLruCacheTest, ConcurrentUseKeepsAccountsConsistent) {
  ShardedLruCache c("l1", 1 << 20);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&c, t] {
      for (int i = 0; i < 5000; ++i) {
        std::string k = absl::StrCat("k", (i * 7 + t) % 300);
        if (!c.Lookup(k)) c.Insert(k, Value(1000 + i % 500));
      }
    });
  }
  for (auto& th : threads) th.join();
  v1::TierStats s = c.Stats();
  EXPECT_EQ(s.hits() + s.misses(), 20000u);
  EXPECT_LE(s.bytes(), uint64_t{1} << 20);
  EXPECT_LE(s.entries(), 300u);
}

}  // namespace
}  // namespace stoker
