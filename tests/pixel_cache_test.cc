// Training from the pixel cache (SessionSpec.pixel_cache): the same
// batches whatever the cache holds (cold, warm, evicting, thread counts),
// equal to decode=full when nothing is scaled, spilled to L2 and found
// there after a restart, within its byte budget.
#include <filesystem>
#include <vector>

#include "client/cpp/read_summary.h"
#include "gtest/gtest.h"
#include "server/sources/arrays/npy.h"
#include "server/sources/arrays/npy_testing.h"
#include "tests/folder_suite.h"
#include "tests/harness.h"
#include "tests/testdata.h"
#include "server/cache/l2_cache_testing.h"

namespace stoker {
namespace {

using testing::TestDaemon;

class PixelCacheTest : public testing::FolderSuite {
 protected:
  static DaemonOptions Options(int threads, uint64_t pixel_bytes) {
    DaemonOptions o;
    o.decode_threads = threads;
    o.reader_threads = 8;
    o.decoded_cache_bytes = 0;
    o.pixel_cache_bytes = pixel_bytes;
    return o;
  }
  static v1::SessionSpec Cached(uint32_t max_side) {
    v1::SessionSpec s = Spec();
    s.mutable_pixel_cache()->set_max_side(max_side);
    return s;
  }
  // Reads `epochs` epochs of `spec`; the checksum.
  static uint64_t Read(TestDaemon& d, const v1::SessionSpec& spec, int epochs = 3) {
    auto s = d.Connect()->OpenSession(spec);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return 0;
    auto sum = ReadBatches(**s, epochs * (*s)->batches_per_epoch());
    EXPECT_TRUE(sum.ok()) << sum.status();
    EXPECT_EQ(sum->errors, 0u);
    return sum.ok() ? sum->checksum : 0;
  }
  static constexpr int kFiles = 20;  // FolderSuite's dataset.
};

TEST_F(PixelCacheTest, SameBatchesWhateverTheCacheHolds) {
  uint64_t reference;
  {
    TestDaemon d(false, Options(1, 1ULL << 30));
    reference = Read(d, Cached(128));
    // A second session finds every picture in RAM: nothing decoded again.
    EXPECT_EQ(Read(d, Cached(128)), reference);
    auto st = d.Connect()->GetStats();
    EXPECT_EQ(st->pixel_cache_decodes(), uint64_t{kFiles});
    // The reader looks a sample up as its batch is claimed, up to a ring
    // ahead of decode: the first session's second epoch may look up
    // pictures still being filled (misses; single flight still decodes
    // each once). Its third epoch and the whole second session hit.
    EXPECT_GE(testing::TierOf(*st, "pixels").hits(), uint64_t{4 * kFiles});
    EXPECT_EQ(testing::TierOf(*st, "pixels").entries(), uint64_t{kFiles});
    EXPECT_EQ(testing::TierOf(*st, "pixels").evictions(), 0u);
  }
  // Two threads and room for about half the pictures: they evict each
  // other, and the batches stay the same, within budget.
  TestDaemon d(false, Options(2, 400 * 1024));
  EXPECT_EQ(Read(d, Cached(128)), reference);
  auto st = d.Connect()->GetStats();
  const v1::TierStats& px = testing::TierOf(*st, "pixels");
  EXPECT_GT(px.evictions(), 0u);
  EXPECT_LE(px.bytes(), px.capacity_bytes());
  EXPECT_GT(st->pixel_cache_decodes(), uint64_t{kFiles});  // Re-decoded after eviction.
  // Another size is another entry, and other batches (the same 3 epochs).
  EXPECT_NE(Read(d, Cached(96)), reference);
}

// With max_side at least every picture's side nothing is scaled: the
// batches equal a session decoding every pixel each epoch.
TEST_F(PixelCacheTest, UnscaledEqualsDecodeFull) {
  TestDaemon d(false, Options(2, 1ULL << 30));
  EXPECT_EQ(Read(d, Cached(16384)), Read(d, Spec()));
}

TEST_F(PixelCacheTest, SpillsToL2AndSurvivesARestart) {
  const std::string l2 = testdata::MakeTempDir("px-l2");
  DaemonOptions o = Options(2, 1ULL << 30);
  o.l2.path = l2;
  uint64_t first;
  {
    TestDaemon d(false, o);
    first = Read(d, Cached(160), 1);
    L2CacheTesting::Flush(*d.daemon()->l2());
    EXPECT_EQ(d.Connect()->GetStats()->pixel_cache_decodes(), uint64_t{kFiles});
  }
  // A new daemon over the same L2: the same first epoch, and not one
  // picture decoded.
  TestDaemon d(false, o);
  EXPECT_EQ(Read(d, Cached(160), 1), first);
  auto st = d.Connect()->GetStats();
  EXPECT_EQ(st->pixel_cache_decodes(), 0u);
  EXPECT_GE(testing::TierOf(*st, "l2").hits(), uint64_t{kFiles});
  std::filesystem::remove_all(l2);
}

TEST_F(PixelCacheTest, BadSpecsAreNamed) {
  TestDaemon d(false, Options(1, 1 << 20));
  auto c = d.Connect();
  auto small = c->OpenSession(Cached(8));
  EXPECT_EQ(small.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(small.status().message().find("pixel_cache.max_side 8 must be 0 (automatic) or 16..16384"),
            std::string::npos)
      << small.status();
  // A source of arrays holds no pictures to keep.
  const std::string dir = testdata::MakeTempDir("px-arrays");
  const std::vector<uint8_t> rows(4 * 8, 7);
  ASSERT_TRUE(testdata::WriteFile(dir + "/rows.npy",
                                  NpyBytes(ElemType::kUint8, {4, 8}, rows.data()))
                  .ok());
  v1::SessionSpec arrays = Cached(64);
  arrays.mutable_dataset()->mutable_npy()->set_path(dir + "/rows.npy");
  auto npy = c->OpenSession(arrays);
  EXPECT_EQ(npy.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(npy.status().message().find("not to npy:" + dir + "/rows.npy, which holds arrays"),
            std::string::npos)
      << npy.status();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stoker
