// L2Cache on a real LMDB environment in a temporary folder: entries survive
// a reopen, another version is stale, a queued write is read back before it
// is committed, the writer queue is bounded, a full
// map evicts its least recently used entries instead of stopping, bytes are
// counted per owner (and counted again at open), a user past their share
// evicts their own entries only, and values of the earlier format are read.
#include "server/cache/l2_cache.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "server/cache/lmdb_env.h"
#include "tests/testdata.h"
#include "util/checksum.h"
#include "server/cache/l2_cache_testing.h"

namespace stoker {
namespace {

constexpr int64_t kAlice = 1001, kBob = 1002;

FileVersion Version(uint64_t size, int64_t mtime) { return FileVersion{size, mtime, 1, 2}; }

Bytes Payload(std::string s) { return std::make_shared<const std::string>(std::move(s)); }

// `bytes` bytes with structure and noise, different for each `seed`.
std::string Noise(size_t bytes, int seed) {
  std::string v(bytes, '\0');
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<char>((i * 7 + seed) % 251);
  return v;
}

// An environment in a new temporary folder.
L2Options Options(const std::string& name, uint64_t max_bytes) {
  L2Options options;
  options.path = testdata::MakeTempDir(name);
  options.max_bytes = max_bytes;
  return options;
}

TEST(L2CacheTest, EntriesSurviveAReopenForTheirVersionOnly) {
  const L2Options options = Options("l2", 64 << 20);
  {
    absl::StatusOr<std::unique_ptr<L2Cache>> l2 = L2Cache::Open(options);
    ASSERT_TRUE(l2.ok()) << l2.status();
    EXPECT_TRUE((*l2)->Put("a", Version(5, 1), Payload("alpha"), kAlice));
    // A key longer than LMDB's limit is stored under its hash, compared whole.
    EXPECT_TRUE((*l2)->Put(std::string(3000, 'k'), Version(4, 1), Payload("long"), kAlice));
    L2CacheTesting::Flush(**l2);
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

TEST(L2CacheTest, AQueuedWriteIsReadBackUntilItIsCommitted) {
  const L2Options options = Options("l2-pending", 1 << 20);
  absl::StatusOr<std::unique_ptr<L2Cache>> l2 = L2Cache::Open(options);
  ASSERT_TRUE(l2.ok());
  L2CacheTesting::PauseWriter(**l2, true);
  std::string out;
  ASSERT_TRUE((*l2)->Put("a", Version(5, 1), Payload("alpha"), kAlice));
  EXPECT_EQ((*l2)->Lookup("a", Version(5, 1), &out), L2Cache::Result::kHit);
  EXPECT_EQ(out, "alpha");
  EXPECT_EQ((*l2)->Lookup("a", Version(5, 2), &out), L2Cache::Result::kMiss);
  // The latest write of a key is the one read back.
  ASSERT_TRUE((*l2)->Put("a", Version(4, 2), Payload("beta"), kAlice));
  EXPECT_EQ((*l2)->Lookup("a", Version(4, 2), &out), L2Cache::Result::kHit);
  EXPECT_EQ(out, "beta");
  EXPECT_EQ((*l2)->Lookup("a", Version(5, 1), &out), L2Cache::Result::kMiss);
  // A map and a half of 64 KiB values, all read back while queued.
  for (int put = 0; put < 24; ++put) {
    const std::string v = Noise(64 << 10, put);
    ASSERT_TRUE((*l2)->Put("big" + std::to_string(put), Version(v.size(), 1), Payload(v), kAlice));
    ASSERT_EQ((*l2)->Lookup("big" + std::to_string(put), Version(v.size(), 1), &out),
              L2Cache::Result::kHit);
    ASSERT_EQ(out, v);
  }
  EXPECT_EQ((*l2)->Stats().hits(), 26u);
  L2CacheTesting::PauseWriter(**l2, false);
  L2CacheTesting::Flush(**l2);
  // Committed, evicted or dropped: from now on what the map holds, and
  // nothing held back (each hit an entry).
  uint64_t hits = (*l2)->Lookup("a", Version(4, 2), &out) == L2Cache::Result::kHit ? 1 : 0;
  for (int put = 0; put < 24; ++put) {
    const std::string key = "big" + std::to_string(put);
    hits += (*l2)->Lookup(key, Version(64 << 10, 1), &out) == L2Cache::Result::kHit ? 1 : 0;
  }
  const v1::TierStats s = (*l2)->Stats();
  EXPECT_GT(s.evictions(), 0u);
  EXPECT_LT(hits, 25u);
  EXPECT_EQ(hits, s.entries());
}

TEST(L2CacheTest, AFullWriterQueueDropsNewWrites) {
  L2Options options = Options("l2-queue", 64 << 20);
  options.writer_queue = 2;
  absl::StatusOr<std::unique_ptr<L2Cache>> l2 = L2Cache::Open(options);
  ASSERT_TRUE(l2.ok());
  L2CacheTesting::PauseWriter(**l2, true);
  EXPECT_TRUE((*l2)->Put("a", Version(1, 1), Payload("a"), kAlice));
  EXPECT_TRUE((*l2)->Put("b", Version(1, 1), Payload("b"), kAlice));
  EXPECT_FALSE((*l2)->Put("c", Version(1, 1), Payload("c"), kAlice));
  EXPECT_EQ((*l2)->Stats().writer_drops(), 1u);
  EXPECT_EQ((*l2)->Stats().writer_queue_depth(), 2u);
  L2CacheTesting::PauseWriter(**l2, false);
  L2CacheTesting::Flush(**l2);
  std::string out;
  EXPECT_EQ((*l2)->Lookup("b", Version(1, 1), &out), L2Cache::Result::kHit);
  EXPECT_EQ((*l2)->Lookup("c", Version(1, 1), &out), L2Cache::Result::kMiss);
  EXPECT_EQ((*l2)->Stats().inserts(), 2u);
}

TEST(L2CacheTest, TheWriterQueueIsBoundedInBytes) {
  // 1 MiB values against a 4 MiB queue: four wait, the fifth is dropped,
  // however few writes the count bound would allow; one value larger than
  // the bound passes only while nothing else waits.
  L2Options options = Options("l2-queue-bytes", 256 << 20);
  options.writer_queue_bytes = 4 << 20;
  absl::StatusOr<std::unique_ptr<L2Cache>> l2 = L2Cache::Open(options);
  ASSERT_TRUE(l2.ok());
  L2CacheTesting::PauseWriter(**l2, true);
  const std::string mib(1 << 20, 'v');
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE((*l2)->Put(absl::StrCat("k", i), Version(1, 1), Payload(mib), kAlice)) << i;
  }
  EXPECT_FALSE((*l2)->Put("k4", Version(1, 1), Payload(mib), kAlice));
  EXPECT_EQ((*l2)->Stats().writer_drops(), 1u);
  EXPECT_EQ((*l2)->Stats().writer_queue_depth(), 4u);
  L2CacheTesting::PauseWriter(**l2, false);
  L2CacheTesting::Flush(**l2);
  L2CacheTesting::PauseWriter(**l2, true);
  // Written: room again, even for one value over the bound.
  EXPECT_TRUE((*l2)->Put("big", Version(1, 1), Payload(std::string(6 << 20, 'b')), kAlice));
  EXPECT_FALSE((*l2)->Put("k5", Version(1, 1), Payload("x"), kAlice));
  L2CacheTesting::PauseWriter(**l2, false);
  L2CacheTesting::Flush(**l2);
  std::string out;
  EXPECT_EQ((*l2)->Lookup("k3", Version(1, 1), &out), L2Cache::Result::kHit);
  EXPECT_EQ(out, mib);
  EXPECT_EQ((*l2)->Lookup("k4", Version(1, 1), &out), L2Cache::Result::kMiss);
  EXPECT_EQ((*l2)->Lookup("big", Version(1, 1), &out), L2Cache::Result::kHit);
  EXPECT_EQ((*l2)->Stats().inserts(), 5u);
}

// A map written far past its size keeps taking writes: entries are evicted
// least recently used first (one that is hit between writes stays), and
// only a value larger than the map is dropped.
TEST(L2CacheTest, AFullMapEvictsInsteadOfStopping) {
  const L2Options options = Options("l2-full", 1 << 20);
  absl::StatusOr<std::unique_ptr<L2Cache>> l2 = L2Cache::Open(options);
  ASSERT_TRUE(l2.ok());
  ASSERT_TRUE((*l2)->Put("first", Version(1, 1), Payload("1"), kAlice));
  L2CacheTesting::Flush(**l2);
  std::string out;
  // 64 KiB values: 48 of them, three maps' worth.
  for (int put = 0; put < 48; ++put) {
    const std::string v = Noise(64 << 10, put);
    ASSERT_TRUE((*l2)->Put("big" + std::to_string(put), Version(v.size(), 1), Payload(v), kAlice));
    L2CacheTesting::Flush(**l2);
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
  EXPECT_FALSE((*l2)->Put("huge", Version(200 << 10, 1), Payload(std::string(200 << 10, 'x')),
                          kAlice));
  EXPECT_EQ((*l2)->Stats().writer_drops(), 1u);
  EXPECT_TRUE((*l2)->Put("later", Version(1, 1), Payload("x"), kAlice));
  L2CacheTesting::Flush(**l2);
  EXPECT_EQ((*l2)->Lookup("later", Version(1, 1), &out), L2Cache::Result::kHit);
}

TEST(L2CacheTest, BytesAreCountedPerOwnerAndCountedAgainAtOpen) {
  const L2Options options = Options("l2-owners", 64 << 20);
  const uint64_t nobody = L2Cache::ValueBytes(1, 6) + L2Cache::ValueBytes(1, 3);
  {
    absl::StatusOr<std::unique_ptr<L2Cache>> l2 = L2Cache::Open(options);
    ASSERT_TRUE(l2.ok()) << l2.status();
    EXPECT_EQ((*l2)->OwnedBytes(kAlice), 0u);
    ASSERT_TRUE((*l2)->Put("a", Version(5, 1), Payload("alpha"), kAlice));
    ASSERT_TRUE((*l2)->Put("b", Version(4, 1), Payload("beta"), kBob));
    ASSERT_TRUE((*l2)->Put("c", Version(5, 1), Payload("gamma"), kAlice));
    ASSERT_TRUE((*l2)->Put("v", FileVersion{}, Payload("volume"), L2Cache::kNobody));
    ASSERT_TRUE((*l2)->Put("n", FileVersion{}, Payload("neg"), -7));  // Any negative: nobody.
    L2CacheTesting::Flush(**l2);
    EXPECT_EQ((*l2)->OwnedBytes(kAlice), 2 * L2Cache::ValueBytes(1, 5));
    EXPECT_EQ((*l2)->OwnedBytes(kBob), L2Cache::ValueBytes(1, 4));
    EXPECT_EQ((*l2)->OwnedBytes(L2Cache::kNobody), nobody);
    EXPECT_EQ((*l2)->OwnedBytes(-7), 0u);
    // An overwrite moves the entry to its new owner, at its new size.
    ASSERT_TRUE((*l2)->Put("a", Version(7, 1), Payload("alpha 2"), kBob));
    L2CacheTesting::Flush(**l2);
    EXPECT_EQ((*l2)->OwnedBytes(kAlice), L2Cache::ValueBytes(1, 5));
    EXPECT_EQ((*l2)->OwnedBytes(kBob), L2Cache::ValueBytes(1, 4) + L2Cache::ValueBytes(1, 7));
  }
  // Counted again from the values' headers.
  absl::StatusOr<std::unique_ptr<L2Cache>> l2 = L2Cache::Open(options);
  ASSERT_TRUE(l2.ok()) << l2.status();
  EXPECT_EQ((*l2)->OwnedBytes(kAlice), L2Cache::ValueBytes(1, 5));
  EXPECT_EQ((*l2)->OwnedBytes(kBob), L2Cache::ValueBytes(1, 4) + L2Cache::ValueBytes(1, 7));
  EXPECT_EQ((*l2)->OwnedBytes(L2Cache::kNobody), nobody);
  std::string out;
  EXPECT_EQ((*l2)->Lookup("a", Version(7, 1), &out), L2Cache::Result::kHit);
  EXPECT_EQ(out, "alpha 2");
}

// Two users of a 1 MiB map: Bob's four 16 KiB entries, written first, are
// the sweep's first keys ("bob0".."bob3"); Alice writes 64 KiB values
// ("img00", ... in the order written). A value of `bytes` under key `key`
// is Noise(bytes, seed) at Version(bytes, 1).
class TwoUsersTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kBobBytes = 16 << 10, kAliceBytes = 64 << 10;
  static std::string BobKey(int i) { return "bob" + std::to_string(i); }
  static std::string AliceKey(int i) { return absl::StrFormat("img%02d", i); }

  void SetUp() override {
    options_ = Options("l2-users", 1 << 20);
    absl::StatusOr<std::unique_ptr<L2Cache>> l2 = L2Cache::Open(options_);
    ASSERT_TRUE(l2.ok()) << l2.status();
    l2_ = *std::move(l2);
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(Put(BobKey(i), kBobBytes, i, kBob));
    L2CacheTesting::Flush(*l2_);
  }
  bool Put(const std::string& key, uint64_t bytes, int seed, int64_t owner) {
    return l2_->Put(key, Version(bytes, 1), Payload(Noise(bytes, seed)), owner);
  }
  // Alice's value `i`, written alone.
  void PutAlice(int i) {
    ASSERT_TRUE(Put(AliceKey(i), kAliceBytes, i, kAlice));
    L2CacheTesting::Flush(*l2_);
  }
  L2Cache::Result Lookup(const std::string& key, uint64_t bytes) {
    return l2_->Lookup(key, Version(bytes, 1), &out_);
  }

  L2Options options_;
  std::unique_ptr<L2Cache> l2_;
  std::string out_;  // The last hit's payload.
};

// Bob's entries, never hit, all stay while Alice writes three maps' worth:
// the sweep takes only Alice's, who is over her share, and the counts
// follow every eviction.
TEST_F(TwoUsersTest, AUserPastTheirShareEvictsTheirOwnEntriesOnly) {
  for (int put = 0; put < 48; ++put) PutAlice(put);
  EXPECT_GT(l2_->Stats().evictions(), 16u);
  EXPECT_EQ(l2_->Stats().writer_drops(), 0u);
  EXPECT_EQ(l2_->OwnedBytes(kBob), 4 * L2Cache::ValueBytes(4, kBobBytes));
  // Alice's count is what she still has.
  uint64_t alice = 0;
  int oldest = -1;
  for (int put = 0; put < 48; ++put) {
    if (Lookup(AliceKey(put), kAliceBytes) == L2Cache::Result::kHit) {
      alice += L2Cache::ValueBytes(5, kAliceBytes);
      if (oldest < 0) oldest = put;
    }
  }
  EXPECT_EQ(l2_->OwnedBytes(kAlice), alice);
  EXPECT_GT(oldest, 0);
  EXPECT_LT(alice, options_.max_bytes);
  EXPECT_EQ(Lookup(AliceKey(47), kAliceBytes), L2Cache::Result::kHit);

  // Bob, within his share, writes large values past the point of eviction
  // (three, each written alone): room is made from Alice's entries (every
  // one of them just hit), not his.
  for (int i = 4; i < 7; ++i) {
    ASSERT_TRUE(Put(BobKey(i), kAliceBytes, i, kBob));
    L2CacheTesting::Flush(*l2_);
  }
  // Not one of Bob's entries was hit before this: none was spared for it.
  for (int i = 0; i < 7; ++i) {
    const uint64_t bytes = i < 4 ? kBobBytes : kAliceBytes;
    ASSERT_EQ(Lookup(BobKey(i), bytes), L2Cache::Result::kHit) << i;
    EXPECT_EQ(out_, Noise(bytes, i));
  }
  EXPECT_EQ(l2_->OwnedBytes(kBob),
            4 * L2Cache::ValueBytes(4, kBobBytes) + 3 * L2Cache::ValueBytes(4, kAliceBytes));
  EXPECT_LT(l2_->OwnedBytes(kAlice), alice);
}

// Recency does not shield a user past their share: every one of Alice's
// entries was just hit, none of Bob's, and still only Alice's go, her
// least recently written first.
TEST_F(TwoUsersTest, AUserPastTheirShareLosesEvenRecentlyHitEntriesFirst) {
  // Eleven of Alice's fit below the point of eviction; each is then hit.
  for (int put = 0; put < 11; ++put) PutAlice(put);
  ASSERT_EQ(l2_->Stats().evictions(), 0u);
  for (int put = 0; put < 11; ++put) {
    ASSERT_EQ(Lookup(AliceKey(put), kAliceBytes), L2Cache::Result::kHit);
  }
  PutAlice(11);  // Passes it.
  const uint64_t evicted = l2_->Stats().evictions();
  ASSERT_GT(evicted, 0u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Lookup(BobKey(i), kBobBytes), L2Cache::Result::kHit) << i;
  EXPECT_EQ(Lookup(AliceKey(0), kAliceBytes), L2Cache::Result::kMiss);
  EXPECT_EQ(Lookup(AliceKey(11), kAliceBytes), L2Cache::Result::kHit);
  EXPECT_EQ(l2_->OwnedBytes(kBob), 4 * L2Cache::ValueBytes(4, kBobBytes));
  EXPECT_EQ(l2_->OwnedBytes(kAlice), (12 - evicted) * L2Cache::ValueBytes(5, kAliceBytes));
}

// A value as the SKL3 format wrote it: magic, key and payload lengths, the
// source's size, mtime and ctime, a checksum over those, the key and the
// payload, then the key and the payload.
std::string OldFormatValue(const std::string& key, const FileVersion& version,
                           const std::string& payload) {
  std::string value;
  auto append = [&value](const auto& field) {
    value.append(reinterpret_cast<const char*>(&field), sizeof(field));
  };
  append(uint32_t{0x334c4b53});  // "SKL3"
  append(static_cast<uint32_t>(key.size()));
  append(version.size);
  append(version.mtime_ns);
  append(version.ctime_ns);
  append(static_cast<uint64_t>(payload.size()));
  Checksum c;
  c.Update(value.data(), value.size());
  c.Update(key.data(), key.size());
  c.Update(payload.data(), payload.size());
  append(c.value());
  return value + key + payload;
}

// Values written before owners were recorded are read, charged to nobody
// until overwritten; a corrupt value's delete is taken off its owner.
TEST(L2CacheTest, OldFormatValuesAreReadAndChargedToNobody) {
  const L2Options options = Options("l2-old", 64 << 20);
  {
    absl::StatusOr<std::unique_ptr<L2Cache>> l2 = L2Cache::Open(options);
    ASSERT_TRUE(l2.ok()) << l2.status();
    ASSERT_TRUE((*l2)->Put("bad", Version(7, 1), Payload("corrupt"), kBob));
  }
  const std::string old = OldFormatValue("old", Version(6, 1), "legacy");
  {
    LmdbEnv::Options o;
    o.read_only = false;
    o.map_bytes = options.max_bytes;
    absl::StatusOr<std::unique_ptr<LmdbEnv>> env = LmdbEnv::Open(options.path, o);
    ASSERT_TRUE(env.ok()) << env.status();
    std::string bad;
    ASSERT_TRUE((*env)->Get("bad", &bad).ok());
    bad.back() ^= 1;  // The payload no longer matches its checksum.
    ASSERT_TRUE((*env)->WriteTxn([&](MDB_txn* txn, MDB_dbi dbi) {
      for (auto [key, value] : {std::pair<std::string, std::string>{"old", old}, {"bad", bad}}) {
        MDB_val k{key.size(), key.data()}, v{value.size(), value.data()};
        if (int rc = mdb_put(txn, dbi, &k, &v, 0); rc != 0) return LmdbStatus(rc, "put");
      }
      return absl::OkStatus();
    }).ok());
  }
  absl::StatusOr<std::unique_ptr<L2Cache>> l2 = L2Cache::Open(options);
  ASSERT_TRUE(l2.ok()) << l2.status();
  EXPECT_EQ((*l2)->OwnedBytes(L2Cache::kNobody), old.size());
  EXPECT_EQ((*l2)->OwnedBytes(kBob), L2Cache::ValueBytes(3, 7));
  std::string out;
  EXPECT_EQ((*l2)->Lookup("old", Version(6, 1), &out), L2Cache::Result::kHit);
  EXPECT_EQ(out, "legacy");
  EXPECT_EQ((*l2)->Lookup("old", Version(6, 2), &out), L2Cache::Result::kStale);
  EXPECT_EQ((*l2)->Lookup("bad", Version(7, 1), &out), L2Cache::Result::kCorrupt);
  L2CacheTesting::Flush(**l2);  // The corrupt entry's delete.
  EXPECT_EQ((*l2)->OwnedBytes(kBob), 0u);
  EXPECT_EQ((*l2)->Stats().entries(), 1u);
  // Overwritten in the current format: Alice's now.
  ASSERT_TRUE((*l2)->Put("old", Version(6, 1), Payload("legacy 2"), kAlice));
  L2CacheTesting::Flush(**l2);
  EXPECT_EQ((*l2)->OwnedBytes(L2Cache::kNobody), 0u);
  EXPECT_EQ((*l2)->OwnedBytes(kAlice), L2Cache::ValueBytes(3, 8));
  EXPECT_EQ((*l2)->Lookup("old", Version(6, 1), &out), L2Cache::Result::kHit);
  EXPECT_EQ(out, "legacy 2");
}

}  // namespace
}  // namespace stoker
