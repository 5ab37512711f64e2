// L2Cache on a real LMDB environment in a temporary folder: entries survive
// a reopen, another version is stale, the writer queue is bounded, and a
// full map evicts its least recently used entries instead of stopping.
#include "server/l2_cache.h"

#include "gtest/gtest.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

FileVersion Version(uint64_t size, int64_t mtime) { return FileVersion{size, mtime, 1, 2}; }

Bytes Payload(std::string s) { return std::make_shared<const std::string>(std::move(s)); }

TEST(L2CacheTest, EntriesSurviveAReopenForTheirVersionOnly) {
  L2Options options;
  options.path = testdata::MakeTempDir("l2");
  options.max_bytes = 64 << 20;
  {
    absl::StatusOr<std::unique_ptr<L2Cache>> l2 = L2Cache::Open(options);
    ASSERT_TRUE(l2.ok()) << l2.status();
    EXPECT_TRUE((*l2)->Put("a", Version(5, 1), Payload("alpha")));
    // A key longer than LMDB's limit is stored under its hash, compared whole.
    EXPECT_TRUE((*l2)->Put(std::string(3000, 'k'), Version(4, 1), Payload("long")));
    (*l2)->Flush();
    EXPECT_EQ((*l2)->Stats().inserts(), 2u);
    EXPECT_EQ((*l2)->Stats().entries(), 2u);
  }
  absl::StatusOr<std::unique_ptr<L2Cache>> l2 = L2Cache::Open(options);
  ASSERT_TRUE(l2.ok());
  std::string out;
  EXPECT_EQ((*l2)->Lookup("a", Version(5, 1), &out), L2Cache::Result::kHit);
  EXPECT_EQ(out, "alpha");
  EXPECT_EQ((*l2)->Lookup(std::string(3000, 'k'), Version(4, 1), &out), L2Cache::Result::kHit);
  EXPECT_EQ(out, "long");
  EXPECT_EQ((*l2)->Lookup(std::string(2999, 'k') + "j", Version(4, 1), &out),
            L2Cache::Result::kMiss);
  EXPECT_EQ((*l2)->Lookup("a", Version(5, 2), &out), L2Cache::Result::kStale);
  EXPECT_EQ((*l2)->Lookup("a", Version(6, 1), &out), L2Cache::Result::kStale);
  // A recycled inode given the old file's size and mtime: its ctime, which
  // no user sets, differs.
  FileVersion forged = Version(5, 1);
  forged.ctime_ns = 99;
  EXPECT_EQ((*l2)->Lookup("a", forged, &out), L2Cache::Result::kStale);
  EXPECT_EQ((*l2)->Lookup("b", Version(5, 1), &out), L2Cache::Result::kMiss);
  const v1::TierStats s = (*l2)->Stats();
  EXPECT_EQ(s.hits(), 2u);
  EXPECT_EQ(s.stale(), 3u);
  EXPECT_EQ(s.misses(), 2u);
}

TEST(L2CacheTest, AFullWriterQueueDropsNewWrites) {
  L2Options options;
  options.path = testdata::MakeTempDir("l2-queue");
  options.max_bytes = 64 << 20;
  options.writer_queue = 2;
  absl::StatusOr<std::unique_ptr<L2Cache>> l2 = L2Cache::Open(options);
  ASSERT_TRUE(l2.ok());
  (*l2)->PauseWriter(true);
  EXPECT_TRUE((*l2)->Put("a", Version(1, 1), Payload("a")));
  EXPECT_TRUE((*l2)->Put("b", Version(1, 1), Payload("b")));
  EXPECT_FALSE((*l2)->Put("c", Version(1, 1), Payload("c")));
  EXPECT_EQ((*l2)->Stats().writer_drops(), 1u);
  EXPECT_EQ((*l2)->Stats().writer_queue_depth(), 2u);
  (*l2)->PauseWriter(false);
  (*l2)->Flush();
  std::string out;
  EXPECT_EQ((*l2)->Lookup("b", Version(1, 1), &out), L2Cache::Result::kHit);
  EXPECT_EQ((*l2)->Lookup("c", Version(1, 1), &out), L2Cache::Result::kMiss);
  EXPECT_EQ((*l2)->Stats().inserts(), 2u);
}

// A map written far past its size keeps taking writes: entries are evicted
// least recently used first (one that is hit between writes stays), and
// only a value larger than the map is dropped.
TEST(L2CacheTest, AFullMapEvictsInsteadOfStopping) {
  L2Options options;
  options.path = testdata::MakeTempDir("l2-full");
  options.max_bytes = 1 << 20;
  absl::StatusOr<std::unique_ptr<L2Cache>> l2 = L2Cache::Open(options);
  ASSERT_TRUE(l2.ok());
  ASSERT_TRUE((*l2)->Put("first", Version(1, 1), Payload("1")));
  (*l2)->Flush();
  std::string out;
  // 64 KiB values with structure and noise: 48 of them, three maps' worth.
  for (int put = 0; put < 48; ++put) {
    std::string v(64 << 10, '\0');
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<char>((i * 7 + put) % 251);
    ASSERT_TRUE((*l2)->Put("big" + std::to_string(put), Version(v.size(), 1), Payload(v)));
    (*l2)->Flush();
    // "first" is used all along.
    ASSERT_EQ((*l2)->Lookup("first", Version(1, 1), &out), L2Cache::Result::kHit) << put;
  }
  const v1::TierStats s = (*l2)->Stats();
  EXPECT_EQ(s.map_full(), 0u);
  EXPECT_EQ(s.inserts(), 49u);
  EXPECT_EQ(s.writer_drops(), 0u);
  EXPECT_GT(s.evictions(), 16u);
  EXPECT_LT(s.entries(), 16u);
  EXPECT_EQ(out, "1");
  // The newest entries are there; the oldest big ones are gone.
  std::string v47(64 << 10, '\0');
  EXPECT_EQ((*l2)->Lookup("big47", Version(v47.size(), 1), &out), L2Cache::Result::kHit);
  EXPECT_EQ((*l2)->Lookup("big0", Version(v47.size(), 1), &out), L2Cache::Result::kMiss);
  // A value larger than an eighth of the map is refused (it would evict
  // most entries to fit), and writes go on after it.
  EXPECT_FALSE((*l2)->Put("huge", Version(200 << 10, 1), Payload(std::string(200 << 10, 'x'))));
  EXPECT_EQ((*l2)->Stats().writer_drops(), 1u);
  EXPECT_TRUE((*l2)->Put("later", Version(1, 1), Payload("x")));
  (*l2)->Flush();
  EXPECT_EQ((*l2)->Lookup("later", Version(1, 1), &out), L2Cache::Result::kHit);
}

}  // namespace
}  // namespace stoker
