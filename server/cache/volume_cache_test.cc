#include "server/cache/volume_cache.h"

#include <atomic>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "server/pool/thread_pool.h"

namespace stoker {
namespace {

// A decode that fills `bytes` with `value`, counting its calls.
VolumeCache::Decode Filling(uint8_t value, std::atomic<int>* calls) {
  return [value, calls](const VolumeCache::Parallel&, uint8_t* out) {
    calls->fetch_add(1);
    std::memset(out, value, 1000);
    return absl::OkStatus();
  };
}

TEST(VolumeCacheTest, DecodesOnceThenServesFromRam) {
  VolumeCache cache(10'000);
  std::atomic<int> calls{0};
  absl::StatusOr<Buffer> a = cache.Get("v0", 1000, Filling(7, &calls));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_NE(*a, nullptr);
  EXPECT_EQ(**a, std::string(1000, '\7'));
  absl::StatusOr<Buffer> b = cache.Get("v0", 1000, Filling(9, &calls));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->get(), a->get());  // The kept entry, not a second decode.
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(cache.decodes(), 1u);
  const v1::TierStats s = cache.Stats();
  EXPECT_EQ(s.tier(), "volumes");
  EXPECT_EQ(s.hits(), 1u);
  EXPECT_EQ(s.entries(), 1u);
}

// A hit is checked against what its reader expects: a kept volume of
// another size (or piece count) is an error, never a buffer copied past.
TEST(VolumeCacheTest, AHitOfAnotherSizeIsAnError) {
  VolumeCache cache(10'000);
  std::atomic<int> calls{0};
  ASSERT_TRUE(cache.Get("v0", 1000, Filling(7, &calls)).ok());
  absl::StatusOr<Buffer> longer = cache.Get("v0", 2000, Filling(7, &calls));
  EXPECT_EQ(longer.status().code(), absl::StatusCode::kInternal) << longer.status();
  auto fill = [](uint64_t, uint8_t*) { return absl::OkStatus(); };
  EXPECT_EQ(cache.GetPieces("v0", 4000, 4, {0}, fill).status().code(),
            absl::StatusCode::kInternal);
  ASSERT_TRUE(cache.GetPieces("p", 1000, 10, {0}, fill).ok());
  EXPECT_EQ(cache.GetPieces("p", 1000, 5, {0}, fill).status().code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(calls.load(), 1);
}

TEST(VolumeCacheTest, ConcurrentReadersOfOneVolumeShareOneDecode) {
  VolumeCache cache(10'000);
  std::atomic<int> calls{0};
  absl::Notification release;
  std::atomic<int> started{0};
  auto held = [&](const VolumeCache::Parallel&, uint8_t* out) {
    calls.fetch_add(1);
    release.WaitForNotification();
    std::memset(out, 3, 1000);
    return absl::OkStatus();
  };
  std::vector<std::thread> readers;
  std::vector<Buffer> got(4);
  for (int r = 0; r < 4; ++r) {
    readers.emplace_back([&, r] {
      started.fetch_add(1);
      got[r] = *cache.Get("v", 1000, held);
    });
  }
  while (calls.load() == 0) std::this_thread::yield();  // One decode has begun.
  while (started.load() < 4) std::this_thread::yield();
  release.Notify();
  for (auto& t : readers) t.join();
  EXPECT_EQ(calls.load(), 1);
  for (const Buffer& b : got) EXPECT_EQ(*b, std::string(1000, '\3'));
}

// Decodes in flight hold at most half the cache for one owner: a second
// decode of the same user waits for the first to be kept, while an admin's
// (bound only by the cache's size) goes ahead.
TEST(VolumeCacheTest, DecodesInFlightAreBoundedPerOwner) {
  VolumeCache cache(10'000);
  absl::Notification release_a, a_started;
  std::atomic<bool> b_decoded{false};
  std::atomic<int> calls{0};
  std::thread a([&] {
    auto got = cache.Get("a", 4000, [&](const VolumeCache::Parallel&, uint8_t* out) {
      a_started.Notify();
      release_a.WaitForNotification();
      std::memset(out, 1, 4000);
      return absl::OkStatus();
    }, /*owner=*/7);
    EXPECT_TRUE(got.ok() && *got != nullptr);
  });
  a_started.WaitForNotification();
  EXPECT_EQ(cache.inflight_bytes(), 4000u);
  std::thread b([&] {
    auto got = cache.Get("b", 4000, [&](const VolumeCache::Parallel&, uint8_t* out) {
      b_decoded = true;
      std::memset(out, 2, 4000);
      return absl::OkStatus();
    }, /*owner=*/7);
    EXPECT_TRUE(got.ok() && *got != nullptr);
  });
  // An admin's decode is not held up by uid 7's.
  auto admin = cache.Get("c", 4000, Filling(3, &calls), /*owner=*/-1);
  ASSERT_TRUE(admin.ok());
  EXPECT_NE(*admin, nullptr);
  EXPECT_FALSE(b_decoded.load());  // 4000 + 4000 is past uid 7's 5000 in flight.
  release_a.Notify();
  a.join();
  b.join();
  EXPECT_TRUE(b_decoded.load());
  EXPECT_EQ(cache.inflight_bytes(), 0u);
  // One larger than the owner's half runs alone.
  auto big = cache.Get("d", 6000, Filling(4, &calls), /*owner=*/8);
  ASSERT_TRUE(big.ok());
  EXPECT_NE(*big, nullptr);
}

TEST(VolumeCacheTest, LeastRecentlyUsedVolumesLeaveFirst) {
  VolumeCache cache(2'300);  // Two 1000-byte volumes and their keys.
  std::atomic<int> calls{0};
  ASSERT_TRUE(cache.Get("a", 1000, Filling(1, &calls)).ok());
  ASSERT_TRUE(cache.Get("b", 1000, Filling(2, &calls)).ok());
  ASSERT_TRUE(cache.Get("a", 1000, Filling(1, &calls)).ok());  // a is recent.
  ASSERT_TRUE(cache.Get("c", 1000, Filling(3, &calls)).ok());  // b leaves.
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(cache.Stats().evictions(), 1u);
  ASSERT_TRUE(cache.Get("a", 1000, Filling(1, &calls)).ok());
  EXPECT_EQ(calls.load(), 3);
  ASSERT_TRUE(cache.Get("b", 1000, Filling(2, &calls)).ok());
  EXPECT_EQ(calls.load(), 4);
}

TEST(VolumeCacheTest, AVolumeLargerThanTheBudgetIsNeverDecoded) {
  VolumeCache cache(900);
  std::atomic<int> calls{0};
  absl::StatusOr<Buffer> v = cache.Get("big", 1000, Filling(1, &calls));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, nullptr);
  EXPECT_EQ(calls.load(), 0);
  EXPECT_EQ(cache.oversized(), 1u);
  // Nor is a 1 TB volume allocated.
  EXPECT_EQ(*cache.Get("huge", 1ULL << 40, Filling(1, &calls)), nullptr);
  EXPECT_EQ(cache.oversized(), 2u);
}

TEST(VolumeCacheTest, AFailedDecodeIsReturnedAndTriedAgainLater) {
  VolumeCache cache(10'000);
  int calls = 0;
  auto failing = [&](const VolumeCache::Parallel&, uint8_t*) {
    ++calls;
    return absl::DataLossError("v.h5: chunk [0, 0] does not inflate");
  };
  absl::StatusOr<Buffer> v = cache.Get("v", 1000, failing);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(v.status().message(), "v.h5: chunk [0, 0] does not inflate");
  EXPECT_FALSE(cache.Get("v", 1000, failing).ok());
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(cache.Stats().entries(), 0u);
  EXPECT_EQ(cache.decodes(), 0u);
}

TEST(VolumeCacheTest, DerivedEntriesAreMadeOnceAndKeptInTheBudget) {
  VolumeCache cache(1'000);
  int calls = 0;
  auto make = [&]() -> absl::StatusOr<Buffer> {
    ++calls;
    return BufferOf(std::string(300, 'f'));
  };
  absl::StatusOr<Buffer> a = cache.Keep("v|foreground", make);
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<Buffer> b = cache.Keep("v|foreground", make);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(cache.Stats().entries(), 1u);
  EXPECT_EQ(cache.decodes(), 0u);  // Not a volume decode.
  // A volume that needs the room pushes it out; it is made again later.
  std::atomic<int> decodes{0};
  ASSERT_TRUE(cache.Get("big", 900, [&](const VolumeCache::Parallel&, uint8_t* out) {
                     decodes.fetch_add(1);
                     std::memset(out, 1, 900);
                     return absl::OkStatus();
                   }).ok());
  ASSERT_TRUE(cache.Keep("v|foreground", make).ok());
  EXPECT_EQ(calls, 2);
  // Errors are returned, not kept.
  auto failing = []() -> absl::StatusOr<Buffer> { return absl::DataLossError("changed"); };
  EXPECT_EQ(cache.Keep("w|foreground", failing).status().code(), absl::StatusCode::kDataLoss);
}

// A volume of 10 pieces of 100 bytes, piece p filled with byte p + 1.
absl::Status FillPiece(uint64_t p, uint8_t* volume, std::atomic<int>* fills) {
  fills[p].fetch_add(1);
  std::memset(volume + p * 100, static_cast<int>(p + 1), 100);
  return absl::OkStatus();
}

TEST(VolumeCacheTest, PiecesAreFilledOnceAsReadsNeedThem) {
  ThreadPool pool("decode", 2);
  VolumeCache cache(10'000, [&](size_t n, const std::function<void(size_t)>& fn) {
    ParallelFor(&pool, pool.size(), n, fn);
  });
  std::atomic<int> fills[10] = {};
  auto fill = [&](uint64_t p, uint8_t* v) { return FillPiece(p, v, fills); };
  absl::StatusOr<Buffer> a = cache.GetPieces("v", 1000, 10, {2, 3}, fill);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->substr(200, 200), std::string(100, '\3') + std::string(100, '\4'));
  EXPECT_EQ(fills[0].load() + fills[2].load() + fills[3].load(), 2);
  EXPECT_EQ(cache.decodes(), 0u);
  EXPECT_GE(cache.Stats().bytes(), 1000u);  // Charged whole (and its key).
  // Readers at once, needing overlapping pieces: each piece once.
  std::vector<std::thread> readers;
  for (int r = 0; r < 4; ++r) {
    readers.emplace_back([&, r] {
      std::vector<uint64_t> need;
      for (uint64_t p = r; p < 10; p += 2) need.push_back(p);
      absl::StatusOr<Buffer> b = cache.GetPieces("v", 1000, 10, need, fill);
      ASSERT_TRUE(b.ok());
      for (uint64_t p : need) EXPECT_EQ((**b)[p * 100 + 99], static_cast<char>(p + 1));
    });
  }
  for (std::thread& t : readers) t.join();
  for (int p = 0; p < 10; ++p) EXPECT_EQ(fills[p].load(), 1) << p;
  EXPECT_EQ(cache.decodes(), 1u);  // Whole now.
  absl::StatusOr<Buffer> whole = cache.GetPieces("v", 1000, 10, {9}, fill);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->get(), a->get());
  // A volume that cannot fit is null, unfilled.
  EXPECT_EQ(*cache.GetPieces("big", 20'000, 10, {0}, fill), nullptr);
  EXPECT_EQ(cache.oversized(), 1u);
}

// A spill kept in a map, as L2 would keep it across restarts.
struct MapSpill {
  absl::Mutex mu;
  std::map<std::string, std::string> kept;
  int gets = 0;
  VolumeCache::Spill spill() {
    return VolumeCache::Spill{
        [this](const std::string& key, const Buffer& bytes) {
          absl::MutexLock lock(&mu);
          kept[key] = std::string(*bytes);
        },
        [this](const std::string& key, uint64_t bytes, uint8_t* out) {
          absl::MutexLock lock(&mu);
          ++gets;
          auto it = kept.find(key);
          if (it == kept.end() || it->second.size() != bytes) return false;
          std::memcpy(out, it->second.data(), bytes);
          return true;
        }};
  }
};

// Volumes decoded whole, or whose last piece was filled, are spilled; a
// new cache (a restarted daemon) finds them there instead of decoding, and
// so does a cache that evicted them. A kept entry of another size is not
// taken.
TEST(VolumeCacheTest, DecodedVolumesAreSpilledAndFoundAgain) {
  MapSpill l2;
  std::atomic<int> calls{0};
  std::atomic<int> fills[10] = {};
  auto fill = [&](uint64_t p, uint8_t* v) { return FillPiece(p, v, fills); };
  {
    VolumeCache cache(10'000);
    cache.set_spill(l2.spill());
    ASSERT_TRUE(cache.Get("whole", 1000, Filling(7, &calls)).ok());
    ASSERT_TRUE(cache.GetPieces("chunked", 1000, 10, {0, 1, 2, 3, 4}, fill).ok());
    EXPECT_EQ(cache.spilled(), 1u);  // Half its pieces: not yet.
    ASSERT_TRUE(cache.GetPieces("chunked", 1000, 10, {5, 6, 7, 8, 9}, fill).ok());
    EXPECT_EQ(cache.spilled(), 2u);
    EXPECT_EQ(cache.unspilled(), 0u);
  }
  ASSERT_EQ(l2.kept.size(), 2u);
  EXPECT_EQ(l2.kept["whole"], std::string(1000, '\7'));
  VolumeCache restarted(10'000);
  restarted.set_spill(l2.spill());
  absl::StatusOr<Buffer> whole = restarted.Get("whole", 1000, Filling(9, &calls));
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(**whole, std::string(1000, '\7'));
  EXPECT_EQ(calls.load(), 1);  // Not decoded again.
  absl::StatusOr<Buffer> chunked = restarted.GetPieces("chunked", 1000, 10, {3}, fill);
  ASSERT_TRUE(chunked.ok());
  for (uint64_t p = 0; p < 10; ++p) {
    EXPECT_EQ((**chunked)[p * 100], static_cast<char>(p + 1)) << p;
    EXPECT_EQ(fills[p].load(), 1) << p;  // Filled once, before the restart.
  }
  EXPECT_EQ(restarted.unspilled(), 2u);
  EXPECT_EQ(restarted.decodes(), 0u);
  EXPECT_EQ(restarted.spilled(), 0u);  // Found there: not written again.
  // Evicted by other volumes, found again.
  ASSERT_TRUE(restarted.Get("a", 4000, Filling(1, &calls)).ok());
  ASSERT_TRUE(restarted.Get("b", 4000, Filling(2, &calls)).ok());
  ASSERT_TRUE(restarted.Get("c", 4000, Filling(3, &calls)).ok());
  EXPECT_GT(restarted.Stats().evictions(), 0u);
  ASSERT_TRUE(restarted.Get("whole", 1000, Filling(9, &calls)).ok());
  EXPECT_EQ(calls.load(), 4);  // a, b and c only.
  // Another size under the same key is decoded, not taken.
  l2.kept["other"] = std::string(10, 'x');
  ASSERT_TRUE(restarted.Get("other", 1000, Filling(5, &calls)).ok());
  EXPECT_EQ(calls.load(), 5);
}

TEST(VolumeCacheTest, AFailedPieceIsReturnedAndFilledLater) {
  VolumeCache cache(10'000);
  bool broken = true;
  int calls = 0;
  auto fill = [&](uint64_t p, uint8_t* v) {
    ++calls;
    if (p == 4 && broken) return absl::DataLossError("v.h5: chunk at [4] does not inflate");
    std::memset(v + p * 100, 1, 100);
    return absl::OkStatus();
  };
  absl::StatusOr<Buffer> a = cache.GetPieces("v", 1000, 10, {3, 4}, fill);
  EXPECT_EQ(a.status().message(), "v.h5: chunk at [4] does not inflate");
  EXPECT_TRUE(cache.GetPieces("v", 1000, 10, {3}, fill).ok());  // 3 was filled.
  EXPECT_EQ(calls, 2);
  broken = false;
  EXPECT_TRUE(cache.GetPieces("v", 1000, 10, {4}, fill).ok());
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(cache.GetPieces("v", 1000, 10, {10}, fill).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Background tasks queued for the test to run one by one, as an idle pool
// would.
struct Idle {
  std::vector<std::function<void()>> tasks;
  VolumeCache::Background background() {
    return [this](std::function<void()> task) { tasks.push_back(std::move(task)); };
  }
  // Runs queued tasks (and those they queue) until none is left; how many.
  int Drain() {
    int ran = 0;
    while (!tasks.empty()) {
      std::function<void()> task = std::move(tasks.front());
      tasks.erase(tasks.begin());
      task();
      ++ran;
    }
    return ran;
  }
};

// A volume a read left partly filled fills the rest in the background, a
// piece per task, skipping pieces already there; it is then whole (a
// decode, spilled once) and later reads fill nothing.
TEST(VolumeCacheTest, TheRestOfAVolumeIsFilledInTheBackground) {
  VolumeCache cache(10'000);
  Idle idle;
  MapSpill l2;
  cache.set_background(idle.background());
  cache.set_spill(l2.spill());
  std::atomic<int> fills[10] = {};
  auto fill = [&](uint64_t p, uint8_t* v) { return FillPiece(p, v, fills); };
  absl::StatusOr<Buffer> a = cache.GetPieces("v", 1000, 10, {2, 7}, fill);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(idle.tasks.size(), 1u);
  ASSERT_TRUE(cache.GetPieces("v", 1000, 10, {3}, fill).ok());
  EXPECT_EQ(idle.tasks.size(), 1u);  // One background fill a volume.
  EXPECT_EQ(idle.Drain(), 7);       // The 7 pieces left, one a task.
  for (int p = 0; p < 10; ++p) {
    EXPECT_EQ(fills[p].load(), 1) << p;
    EXPECT_EQ((**a)[p * 100 + 50], static_cast<char>(p + 1)) << p;
  }
  EXPECT_EQ(cache.pieces(), 10u);
  EXPECT_EQ(cache.background_pieces(), 7u);
  EXPECT_EQ(cache.decodes(), 1u);
  EXPECT_EQ(cache.spilled(), 1u);
  EXPECT_EQ(l2.kept["v"], std::string(**a));
  ASSERT_TRUE(cache.GetPieces("v", 1000, 10, {5}, fill).ok());
  EXPECT_TRUE(idle.tasks.empty());
  EXPECT_EQ(cache.pieces(), 10u);
}

// An evicted volume's background fill stops; one whose fill fails stops
// at that piece, and the volume's next read starts it again past it.
TEST(VolumeCacheTest, TheBackgroundStopsAtAnEvictionOrAnError) {
  VolumeCache cache(1'500);
  Idle idle;
  cache.set_background(idle.background());
  std::atomic<int> fills[10] = {};
  auto fill = [&](uint64_t p, uint8_t* v) { return FillPiece(p, v, fills); };
  ASSERT_TRUE(cache.GetPieces("gone", 1000, 10, {0}, fill).ok());
  std::atomic<int> calls{0};
  ASSERT_TRUE(cache.Get("other", 1000, Filling(1, &calls)).ok());  // Evicts it.
  EXPECT_EQ(idle.Drain(), 1);
  EXPECT_EQ(cache.pieces(), 1u);  // Nothing filled after the eviction.

  VolumeCache second(10'000);
  second.set_background(idle.background());
  bool broken = true;
  int calls4 = 0;
  auto flaky = [&](uint64_t p, uint8_t* v) {
    if (p == 4) {
      ++calls4;
      if (broken) return absl::DataLossError("v.h5: chunk at [4] does not inflate");
    }
    std::memset(v + p * 100, static_cast<int>(p + 1), 100);
    return absl::OkStatus();
  };
  ASSERT_TRUE(second.GetPieces("v", 1000, 10, {1}, flaky).ok());
  EXPECT_EQ(idle.Drain(), 4);  // 0, 2, 3, then 4 fails.
  EXPECT_EQ(second.background_pieces(), 3u);
  EXPECT_EQ(calls4, 1);
  ASSERT_TRUE(second.GetPieces("v", 1000, 10, {0}, flaky).ok());
  EXPECT_EQ(idle.Drain(), 5);  // 5..9, past 4.
  EXPECT_EQ(calls4, 1);
  EXPECT_EQ(second.decodes(), 0u);  // Piece 4 is still empty...
  broken = false;
  absl::StatusOr<Buffer> v = second.GetPieces("v", 1000, 10, {4}, flaky);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ((**v)[450], '\5');
  EXPECT_EQ(second.decodes(), 1u);  // ...until a read fills it.
  EXPECT_TRUE(idle.tasks.empty());
}

TEST(VolumeCacheTest, ADecodeSpreadsItsItemsOverThePool) {
  ThreadPool pool("decode", 2);
  VolumeCache cache(1 << 20, [&](size_t n, const std::function<void(size_t)>& fn) {
    ParallelFor(&pool, pool.size(), n, fn);
  });
  auto chunked = [](const VolumeCache::Parallel& parallel, uint8_t* out) {
    parallel(100, [out](size_t i) { std::memset(out + i * 100, static_cast<int>(i), 100); });
    return absl::OkStatus();
  };
  absl::StatusOr<Buffer> v = cache.Get("v", 10'000, chunked);
  ASSERT_TRUE(v.ok());
  for (size_t i = 0; i < 100; ++i)
    EXPECT_EQ(static_cast<uint8_t>((**v)[i * 100 + 99]), i) << i;
}

}  // namespace
}  // namespace stoker
