// SampleFetcher over an in-memory source: L1, L2 across a restart, what is
// never cached, and concurrent fetches of one file sharing one read.
#include "server/cache/fetcher.h"

#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/dataset/memory_source.h"
#include "tests/testdata.h"
#include "server/cache/l2_cache_testing.h"

namespace stoker {
namespace {

constexpr int64_t kUid = 1000;  // The fetching session's.

// File "a" ("alpha") of an in-memory source, and a fetcher with 1 MiB of L1.
struct OneFile {
  explicit OneFile(int threads) : f(&l1, nullptr, threads) { src->Put("a", "alpha"); }
  std::shared_ptr<MemorySource> src = std::make_shared<MemorySource>("root");
  std::shared_ptr<Dataset> ds = MemoryDataset(src, {{"a"}});
  ShardedLruCache l1{"l1", 1 << 20};
  SampleFetcher f;
};

TEST(FetcherTest, ReadsOnceThenServesFromRam) {
  OneFile t(2);
  bool from_source = false;
  absl::StatusOr<Bytes> got = t.f.Fetch(*t.ds, "a", kUid, &from_source);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(**got, "alpha");
  EXPECT_TRUE(from_source);
  got = t.f.Fetch(*t.ds, "a", kUid, &from_source);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(from_source);
  EXPECT_EQ(t.src->reads(), 1);
  v1::ReaderStats stats = t.f.Stats();
  EXPECT_EQ(stats.source_reads(), 1u);
  EXPECT_EQ(stats.source_bytes(), 5u);
  EXPECT_EQ(stats.source_stats(), 0u);  // An in-memory source opens nothing.
  EXPECT_EQ(stats.threads(), 2);
  EXPECT_EQ(t.l1.Stats().hits(), 1u);

  // A new version is another entry.
  t.src->Put("a", "alpha, edited", 2);
  got = t.f.Fetch(*t.ds, "a", kUid);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(**got, "alpha, edited");
  EXPECT_EQ(t.src->reads(), 2);
}

TEST(FetcherTest, AKeyNotProvenIsReadNeverServedFromACache) {
  OneFile t(2);
  ASSERT_TRUE(t.f.Fetch(*t.ds, "a", kUid).ok());  // In L1 now.
  t.src->ProveByReading();  // A session that has not read it yet.
  absl::StatusOr<SourceKey> id = t.ds->source->Identify("a");
  ASSERT_TRUE(id.ok());
  ASSERT_FALSE(id->proven);
  bool from_source = false;
  absl::StatusOr<Bytes> got = t.f.Fetch(*t.ds, "a", kUid, &from_source, &*id);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(**got, "alpha");
  EXPECT_TRUE(from_source);
  EXPECT_EQ(t.src->reads(), 2);
  // Proven by that read, it is served from L1 again, even to a fetch that
  // identified it before the read ended (an epoch's last reads overlap
  // the next one's first).
  ASSERT_TRUE(t.f.Fetch(*t.ds, "a", kUid, &from_source, &*id).ok());
  EXPECT_FALSE(from_source);
  EXPECT_EQ(t.src->reads(), 2);
  id = t.ds->source->Identify("a");
  ASSERT_TRUE(id.ok() && id->proven);
  ASSERT_TRUE(t.f.Fetch(*t.ds, "a", kUid, &from_source, &*id).ok());
  EXPECT_FALSE(from_source);
  EXPECT_EQ(t.src->reads(), 2);
}

TEST(FetcherTest, FailuresEmptyFilesAndFilesReplacedMidReadAreNotKept) {
  auto src = std::make_shared<MemorySource>("root");
  src->Put("empty", "");
  src->Put("moving", "before");
  src->ReplaceOnRead("moving", 5);
  auto ds = MemoryDataset(src, {{"empty"}});
  ShardedLruCache l1("l1", 1 << 20);
  SampleFetcher f(&l1, nullptr, 1);
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<Bytes> empty = f.Fetch(*ds, "empty", kUid);
    EXPECT_EQ(empty.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(empty.status().message(), "file is empty");
    absl::StatusOr<Bytes> missing = f.Fetch(*ds, "missing", kUid);
    EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
    // Served, as read, but not kept under the version the stat saw.
    absl::StatusOr<Bytes> moving = f.Fetch(*ds, "moving", kUid);
    ASSERT_TRUE(moving.ok());
    EXPECT_EQ(**moving, "before");
  }
  EXPECT_EQ(src->reads(), 4);  // "empty" and "moving" twice; "missing" never.
  EXPECT_EQ(l1.Stats().entries(), 0u);
  EXPECT_EQ(f.Stats().source_errors(), 4u);  // Two empty reads, two failed stats.
}

TEST(FetcherTest, L2ServesAfterARestartForVersionedSourcesOnly) {
  const std::string dir = testdata::MakeTempDir("fetcher-l2");
  auto files = std::make_shared<MemorySource>("root");
  auto lmdb = std::make_shared<MemorySource>("env", /*versioned=*/false);
  files->Put("a", "alpha");
  lmdb->Put("k", "kappa");
  auto file_ds = MemoryDataset(files, {{"a"}});
  auto lmdb_ds = MemoryDataset(lmdb, {{"k"}});
  L2Options options;
  options.path = dir;
  options.max_bytes = 64 << 20;
  {
    absl::StatusOr<std::unique_ptr<L2Cache>> l2 = L2Cache::Open(options);
    ASSERT_TRUE(l2.ok()) << l2.status();
    ShardedLruCache l1("l1", 1 << 20);
    SampleFetcher f(&l1, l2->get(), 1);
    ASSERT_TRUE(f.Fetch(*file_ds, "a", kUid).ok());
    ASSERT_TRUE(f.Fetch(*lmdb_ds, "k", kUid).ok());
    L2CacheTesting::Flush(**l2);
    EXPECT_EQ((*l2)->Stats().inserts(), 1u);  // LMDB sources are local already.
    // Charged to the session that read it.
    absl::StatusOr<SourceKey> a = files->Identify("a");
    ASSERT_TRUE(a.ok());
    EXPECT_EQ((*l2)->OwnedBytes(kUid), L2Cache::ValueBytes(a->file.size(), 5));
    EXPECT_EQ((*l2)->OwnedBytes(L2Cache::kNobody), 0u);
  }
  absl::StatusOr<std::unique_ptr<L2Cache>> l2 = L2Cache::Open(options);
  ASSERT_TRUE(l2.ok());
  ShardedLruCache l1("l1", 1 << 20);  // The restarted daemon's empty RAM.
  SampleFetcher f(&l1, l2->get(), 1);
  bool from_source = true;
  absl::StatusOr<Bytes> got = f.Fetch(*file_ds, "a", kUid, &from_source);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(**got, "alpha");
  EXPECT_FALSE(from_source);
  EXPECT_EQ(files->reads(), 1);
  ASSERT_TRUE(f.Fetch(*lmdb_ds, "k", kUid, &from_source).ok());
  EXPECT_TRUE(from_source);
  // The file changed while the daemon was down: L2's entry is stale.
  files->Put("b", "beta");
  files->Put("a", "alpha 2", 2);
  ShardedLruCache fresh("l1", 1 << 20);
  SampleFetcher g(&fresh, l2->get(), 1);
  got = g.Fetch(*file_ds, "a", kUid, &from_source);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(**got, "alpha 2");
  EXPECT_TRUE(from_source);
  EXPECT_EQ((*l2)->Stats().stale(), 1u);
}

TEST(FetcherTest, ReadsAreChargedBeforeTheyAllocate) {
  auto src = std::make_shared<MemorySource>("root");
  src->Put("small", std::string(6, 's'));
  src->Put("big", std::string(11, 'b'));
  auto ds = MemoryDataset(src, {{"small"}, {"big"}});
  ShardedLruCache l1("l1", 1 << 20);
  MemoryBudget budget(10, 5);
  SampleFetcher f(&l1, nullptr, 2, &budget);
  // Larger than all reads in flight may hold: refused, never read.
  absl::StatusOr<Bytes> big = f.Fetch(*ds, "big", kUid);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted) << big.status();
  EXPECT_NE(big.status().message().find("--max-read-bytes-in-flight"), std::string::npos);
  EXPECT_EQ(src->reads(), 0);
  // A read in flight holds its file's size (past the user's half: it holds
  // nothing else), given back when the read ends.
  src->Hold();
  std::thread reader([&] {
    absl::StatusOr<Bytes> got = f.Fetch(*ds, "small", kUid);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(**got, "ssssss");
  });
  src->Holding().WaitForNotification();
  EXPECT_EQ(budget.used_by(kUid), 6u);
  src->Release();
  reader.join();
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_EQ(src->reads(), 1);
  // A shard's member is charged its own bytes, not the whole file's.
  absl::StatusOr<SourceKey> member = ds->source->Identify("big");
  ASSERT_TRUE(member.ok());
  member->read_bytes = 3;
  big = f.Fetch(*ds, "big", kUid, nullptr, &*member);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(budget.used(), 0u);
  // Over the daemon's file limit: not charged, left to the source's own
  // refusal by that limit (this one has none, so it reads).
  SampleFetcher limited(&l1, nullptr, 2, &budget, /*max_file_bytes=*/10);
  big = limited.Fetch(*ds, "big", kUid);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(budget.used(), 0u);
}

TEST(FetcherTest, ConcurrentFetchesOfOneFileShareOneRead) {
  OneFile t(4);
  t.src->Hold();
  constexpr int kJoiners = 3;
  std::vector<absl::StatusOr<Bytes>> got(kJoiners + 1);
  std::vector<std::thread> threads;
  threads.emplace_back([&] { got[0] = t.f.Fetch(*t.ds, "a", kUid); });
  t.src->Holding().WaitForNotification();  // The first read has begun.
  for (int i = 1; i <= kJoiners; ++i) {
    threads.emplace_back([&, i] { got[i] = t.f.Fetch(*t.ds, "a", kUid); });
  }
  while (t.f.Stats().joined_reads() < kJoiners) std::this_thread::yield();
  t.src->Release();
  for (std::thread& t : threads) t.join();
  for (const auto& g : got) {
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(**g, "alpha");
  }
  EXPECT_EQ(t.src->reads(), 1);
  EXPECT_EQ(t.f.Stats().joined_reads(), uint64_t{kJoiners});
}

TEST(FetcherTest, AJoinedFetchReadsItselfWhenTheLeadersSessionCloses) {
  // Two sessions' datasets over one source; the first leads a read that
  // waits for room, the second joins it, then the first closes.
  auto src = std::make_shared<MemorySource>("root");
  src->Put("a", "alpha");
  std::shared_ptr<Dataset> closing = MemoryDataset(src, {{"a"}});
  std::shared_ptr<Dataset> staying = MemoryDataset(src, {{"a"}});
  closing->reads_cancel = std::make_shared<Cancellation>();
  staying->reads_cancel = std::make_shared<Cancellation>();
  ShardedLruCache l1("l1", 1 << 20);
  MemoryBudget budget(10, 10);
  std::shared_ptr<void> full = budget.Charge(7, 10);  // No room yet.
  SampleFetcher f(&l1, nullptr, 2, &budget);
  absl::StatusOr<Bytes> led, joined;
  std::thread leader([&] { led = f.Fetch(*closing, "a", kUid); });
  while (budget.waiting() == 0) std::this_thread::yield();  // Its read is in flight.
  std::thread joiner([&] { joined = f.Fetch(*staying, "a", kUid + 1); });
  while (f.Stats().joined_reads() == 0) std::this_thread::yield();
  closing->reads_cancel->Cancel();
  leader.join();
  EXPECT_EQ(led.status().code(), absl::StatusCode::kCancelled) << led.status();
  full.reset();  // Room: the joiner's own read goes on.
  joiner.join();
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(**joined, "alpha");
  EXPECT_EQ(src->reads(), 1);
  EXPECT_EQ(budget.used(), 0u);
}

// A session's reader holds its sample's room, and a warm-up of the same
// file finds none left: the warm-up waits before it leads a read, so the
// reader reads on its own instead of joining a read that waits for the
// room the reader holds (which, before, stalled both for minutes).
TEST(FetcherTest, AWarmUpTakesItsRoomBeforeItLeadsARead) {
  auto src = std::make_shared<MemorySource>("root");
  src->Put("a", "alpha!");
  std::shared_ptr<Dataset> ds = MemoryDataset(src, {{"a"}});
  ShardedLruCache l1("l1", 1 << 20);
  MemoryBudget budget(/*total=*/10, /*per_user=*/10);
  SampleFetcher f(&l1, nullptr, 2, &budget);
  absl::StatusOr<SourceKey> id = f.Identify(*ds, "a");
  ASSERT_TRUE(id.ok()) << id.status();
  absl::StatusOr<std::shared_ptr<void>> room = f.Charge(*ds, kUid, {*id}, "a");
  ASSERT_TRUE(room.ok()) << room.status();
  EXPECT_EQ(budget.used(), 6u);
  absl::Status warmed = absl::UnknownError("not run");
  std::thread warm([&] { warmed = f.Warm(*ds, "a", L2Cache::kNobody, nullptr); });
  while (budget.waiting() == 0) std::this_thread::yield();  // 6 + 6 > 10.
  absl::StatusOr<Bytes> got = f.Fetch(*ds, "a", kUid, nullptr, &*id, /*charged=*/true);
  EXPECT_EQ(f.Stats().joined_reads(), 0u);
  room->reset();  // The reader's sample is decoded: the warm-up's turn.
  warm.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(**got, "alpha!");
  EXPECT_TRUE(warmed.ok()) << warmed;
  EXPECT_EQ(budget.used(), 0u);
}

TEST(FetcherTest, AnUnprovenFetchJoinsOnlyItsOwnSourcesReadInFlight) {
  // Two sessions' sources of one file (one cache key), neither proven yet.
  OneFile t(4);
  auto other = std::make_shared<MemorySource>("root");
  other->Put("a", "alpha");
  std::shared_ptr<Dataset> other_ds = MemoryDataset(other, {{"a"}});
  absl::StatusOr<SourceKey> id = t.ds->source->Identify("a");
  absl::StatusOr<SourceKey> other_id = other_ds->source->Identify("a");
  ASSERT_TRUE(id.ok() && other_id.ok());
  ASSERT_EQ(id->key(), other_id->key());
  id->proven = other_id->proven = false;
  t.src->Hold();
  std::vector<absl::StatusOr<Bytes>> got(2);
  std::vector<std::thread> threads;
  threads.emplace_back([&] { got[0] = t.f.Fetch(*t.ds, "a", kUid, nullptr, &*id); });
  t.src->Holding().WaitForNotification();
  // The same session's second fetch waits for its read in flight.
  threads.emplace_back([&] { got[1] = t.f.Fetch(*t.ds, "a", kUid, nullptr, &*id); });
  // (Not joined within a minute: it read for itself, which the counts
  // below refuse.)
  for (const absl::Time until = absl::Now() + absl::Seconds(60);
       t.f.Stats().joined_reads() < 1 && absl::Now() < until;) {
    std::this_thread::yield();
  }
  // The other session's proves for itself, while that read is held.
  bool from_source = false;
  absl::StatusOr<Bytes> own = t.f.Fetch(*other_ds, "a", kUid, &from_source, &*other_id);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_TRUE(from_source);
  EXPECT_EQ(other->reads(), 1);
  t.src->Release();
  for (std::thread& th : threads) th.join();
  for (const auto& g : got) {
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(**g, "alpha");
  }
  EXPECT_EQ(t.src->reads(), 1);
  EXPECT_EQ(t.f.Stats().joined_reads(), 1u);
}

}  // namespace
}  // namespace stoker
