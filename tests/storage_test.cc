// The reader stage and the cache tiers, against an in-process daemon whose
// file system counts (and can slow or break) every source read.
#include <sys/stat.h>

#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/cpp/read_summary.h"
#include "gtest/gtest.h"
#include "server/access/fault_injecting_file_system.h"
#include "server/cache/lmdb_env.h"
#include "tests/harness.h"
#include "tests/testdata.h"
#include "util/cache_key.h"
#include "server/cache/l2_cache_testing.h"

namespace stoker {
namespace {

namespace fs = std::filesystem;
using testing::TestDaemon;

constexpr int kSamples = 24;

class StorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testdata::MakeTempDir("st-data");
    testdata::FolderSpec spec;
    spec.classes = 3;
    spec.per_class = 8;
    spec.min_side = 80;
    spec.max_side = 160;
    spec.seed = 31;
    auto paths = testdata::MakeFolderDataset(root_, spec);
    ASSERT_TRUE(paths.ok());
    paths_ = *paths;
    l2_ = testdata::MakeTempDir("st-l2");
  }
  void TearDown() override {
    fs::remove_all(root_);
    fs::remove_all(l2_);
  }

  DaemonOptions Options(bool with_l2) {
    DaemonOptions o;
    o.decode_threads = 2;
    o.reader_threads = 16;
    o.fs = &counting_;
    if (with_l2) o.l2.path = l2_;
    return o;
  }

  v1::SessionSpec Spec(v1::Transform t = v1::TRANSFORM_TRAIN, uint64_t seed = 1) {
    v1::SessionSpec s;
    s.mutable_dataset()->mutable_folder()->set_path(root_);
    s.set_transform(t);
    s.set_batch_size(5);
    s.set_image_size(32);
    s.set_shuffle(true);
    s.set_seed(seed);
    return s;
  }

  // Reads `epochs` epochs in one session; one summary per epoch.
  std::vector<ReadSummary> Read(TestDaemon& d, const v1::SessionSpec& spec,
                                int epochs) {
    auto client = d.Connect();
    auto session = client->OpenSession(spec);
    EXPECT_TRUE(session.ok()) << session.status();
    std::vector<ReadSummary> out;
    for (int e = 0; e < epochs && session.ok(); ++e) {
      auto s = ReadBatches(**session, (*session)->batches_per_epoch());
      EXPECT_TRUE(s.ok()) << s.status();
      if (s.ok()) out.push_back(*s);
    }
    return out;
  }

  static const v1::TierStats& Tier(const v1::DaemonStats& s, const char* name) {
    const v1::TierStats& t = testing::TierOf(s, name);
    EXPECT_EQ(t.tier(), name) << "no tier " << name;
    return t;
  }

  std::string root_, l2_;
  std::vector<std::string> paths_;
  FaultInjectingFileSystem counting_{FileSystem::Default()};
};

TEST_F(StorageTest, SecondEpochFromL1MakesNoSourceReads) {
  TestDaemon d(false, Options(false));
  // Decoding every epoch: the files come from L1 (kept pictures would not
  // need them).
  v1::SessionSpec spec = Spec();
  spec.mutable_pixel_cache()->set_off(true);
  auto epochs = Read(d, spec, 2);
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_EQ(counting_.reads.load(), uint64_t{kSamples});
  EXPECT_NE(epochs[0].checksum, epochs[1].checksum);  // New permutation.
  v1::DaemonStats s = d.daemon()->GetStats();
  EXPECT_EQ(s.reader().source_reads(), uint64_t{kSamples});
  EXPECT_GE(Tier(s, "l1").hits(), uint64_t{kSamples});
  EXPECT_EQ(Tier(s, "l1").entries(), uint64_t{kSamples});
}

TEST_F(StorageTest, RestartedDaemonServesFirstEpochFromL2) {
  uint64_t first;
  {
    TestDaemon d(false, Options(true));
    first = Read(d, Spec(), 1).at(0).checksum;
  }  // Destruction writes everything queued to L2.
  counting_.reads = 0;
  TestDaemon d(false, Options(true));
  auto again = Read(d, Spec(), 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].checksum, first);
  EXPECT_EQ(counting_.reads.load(), 0u);
  v1::DaemonStats s = d.daemon()->GetStats();
  EXPECT_EQ(Tier(s, "l2").hits(), uint64_t{kSamples});
  EXPECT_EQ(Tier(s, "l2").entries(), uint64_t{kSamples});
}

TEST_F(StorageTest, CorruptL2EntryIsCountedDeletedAndReRead) {
  uint64_t clean;
  {
    TestDaemon d(false, Options(true));
    clean = Read(d, Spec(), 1).at(0).checksum;
  }
  {  // Flip one byte near the end (in the JPEG payload) of one entry.
    LmdbEnv::Options o;
    o.read_only = false;
    auto env = LmdbEnv::Open(l2_, o);
    ASSERT_TRUE(env.ok()) << env.status();
    std::string value;
    // L2 keys a file by its identity (sample_source.h).
    struct stat st;
    ASSERT_EQ(stat(paths_[5].c_str(), &st), 0);
    std::string key = CacheKey({"f", static_cast<uint64_t>(st.st_dev),
                                static_cast<uint64_t>(st.st_ino)});
    ASSERT_TRUE((*env)->Get(key, &value).ok());
    value[value.size() - 10] ^= 0x5a;
    ASSERT_TRUE((*env)->WriteTxn([&](MDB_txn* txn, MDB_dbi dbi) {
      MDB_val k{key.size(), key.data()}, v{value.size(), value.data()};
      return LmdbStatus(mdb_put(txn, dbi, &k, &v, 0), "put");
    }).ok());
  }
  counting_.reads = 0;
  TestDaemon d(false, Options(true));
  auto again = Read(d, Spec(), 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].checksum, clean);  // Correct pixels all the same.
  EXPECT_EQ(again[0].errors, 0u);
  EXPECT_EQ(counting_.reads.load(), 1u);
  L2CacheTesting::Flush(*d.daemon()->l2());
  v1::DaemonStats s = d.daemon()->GetStats();
  EXPECT_EQ(Tier(s, "l2").corrupt(), 1u);
  EXPECT_EQ(Tier(s, "l2").hits(), uint64_t{kSamples - 1});
  EXPECT_EQ(Tier(s, "l2").entries(), uint64_t{kSamples});  // Rewritten.
}

TEST_F(StorageTest, FullWriterQueueDropsAndCountsWithoutBlocking) {
  DaemonOptions o = Options(true);
  o.l2.writer_queue = 2;
  TestDaemon d(false, o);
  L2CacheTesting::PauseWriter(*d.daemon()->l2(), true);
  auto epochs = Read(d, Spec(), 1);  // Must complete with the writer held.
  ASSERT_EQ(epochs.size(), 1u);
  EXPECT_EQ(epochs[0].samples, uint64_t{kSamples});
  v1::DaemonStats s = d.daemon()->GetStats();
  EXPECT_EQ(Tier(s, "l2").writer_queue_depth(), 2u);
  EXPECT_EQ(Tier(s, "l2").writer_queue_max(), 2u);
  EXPECT_EQ(Tier(s, "l2").writer_drops(), uint64_t{kSamples - 2});
  L2CacheTesting::PauseWriter(*d.daemon()->l2(), false);
  L2CacheTesting::Flush(*d.daemon()->l2());
  EXPECT_EQ(Tier(d.daemon()->GetStats(), "l2").entries(), 2u);
}

TEST_F(StorageTest, WriterQueueSizeFromEnvironment) {
  setenv("L2_WRITER_QUEUE_MAX", "7", 1);
  TestDaemon d(false, Options(true));
  unsetenv("L2_WRITER_QUEUE_MAX");
  EXPECT_EQ(Tier(d.daemon()->GetStats(), "l2").writer_queue_max(), 7u);
}

// An L2 map far smaller than the dataset: serving goes on, bit-identical,
// while L2 evicts to keep taking writes.
TEST_F(StorageTest, AFullMapEvictsAndServingGoesOn) {
  uint64_t clean;
  {
    TestDaemon d(false, Options(false));
    clean = Read(d, Spec(), 1).at(0).checksum;
  }
  DaemonOptions o = Options(true);
  o.l2.max_bytes = 192 << 10;  // Far less than the dataset's 24 pictures.
  TestDaemon d(false, o);
  // Decoding every epoch, so each reads its files (kept pictures would not).
  v1::SessionSpec spec = Spec();
  spec.mutable_pixel_cache()->set_off(true);
  auto epochs = Read(d, spec, 2);
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_EQ(epochs[0].checksum, clean);
  EXPECT_EQ(epochs[0].errors + epochs[1].errors, 0u);
  L2CacheTesting::Flush(*d.daemon()->l2());
  v1::DaemonStats s = d.daemon()->GetStats();
  EXPECT_GT(Tier(s, "l2").evictions(), 0u) << Tier(s, "l2").DebugString();
  EXPECT_LT(Tier(s, "l2").entries(), uint64_t{kSamples});
}

TEST_F(StorageTest, ChangedSourceFileIsReReadNotServedStale) {
  {
    TestDaemon d(false, Options(true));
    Read(d, Spec(v1::TRANSFORM_VAL), 1);
  }
  // Replace one file with different content (and a later mtime).
  auto jpeg = testdata::EncodeJpeg(testdata::PhotoLikeRgb(120, 90, 999), 120, 90, 90);
  ASSERT_TRUE(jpeg.ok());
  ASSERT_TRUE(testdata::WriteFile(paths_[3], *jpeg).ok());
  struct timespec times[2] = {{0, UTIME_NOW}, {time(nullptr) + 10, 0}};
  utimensat(AT_FDCWD, paths_[3].c_str(), times, 0);
  uint64_t fresh;
  {  // Reference: no L2 at all.
    TestDaemon d(false, Options(false));
    fresh = Read(d, Spec(v1::TRANSFORM_VAL), 1).at(0).checksum;
  }
  counting_.reads = 0;
  TestDaemon d(false, Options(true));
  EXPECT_EQ(Read(d, Spec(v1::TRANSFORM_VAL), 1).at(0).checksum, fresh);
  EXPECT_EQ(counting_.reads.load(), 1u);
  EXPECT_EQ(Tier(d.daemon()->GetStats(), "l2").stale(), 1u);
}

// One manifest read under two roots whose files differ under the same
// relative names: every cache tier (L1, decoded outputs, L2) keys by the
// file read, so the second root gets its own pictures, as a fresh daemon
// gives them.
TEST_F(StorageTest, SameManifestUnderAnotherRootIsNotServedTheFirstRootsPictures) {
  const std::string other = testdata::MakeTempDir("st-other");
  testdata::FolderSpec fspec;
  fspec.classes = 3;
  fspec.per_class = 8;
  fspec.min_side = 80;
  fspec.max_side = 160;
  fspec.seed = 77;  // Other pictures, the same names.
  ASSERT_TRUE(testdata::MakeFolderDataset(other, fspec).ok());
  std::string manifest;
  for (const std::string& p : paths_) {
    absl::StrAppend(&manifest, p.substr(root_.size() + 1), "\t1\n");
  }
  const std::string list = l2_ + "/m.tsv";
  ASSERT_TRUE(testdata::WriteFile(list, manifest).ok());
  auto rooted = [&](const std::string& root, v1::Transform t) {
    v1::SessionSpec s = Spec(t);
    s.mutable_dataset()->mutable_list()->set_path(list);
    s.mutable_dataset()->mutable_list()->set_root(root);
    return s;
  };
  for (v1::Transform t : {v1::TRANSFORM_VAL, v1::TRANSFORM_TRAIN}) {
    uint64_t fresh;
    {
      TestDaemon d(false, Options(false));
      fresh = Read(d, rooted(other, t), 1).at(0).checksum;
    }
    TestDaemon d(false, Options(true));
    const uint64_t a = Read(d, rooted(root_, t), 2).at(0).checksum;  // Cached by epoch 2.
    const uint64_t b = Read(d, rooted(other, t), 1).at(0).checksum;
    EXPECT_NE(a, b) << v1::Transform_Name(t);
    EXPECT_EQ(b, fresh) << v1::Transform_Name(t);
  }
  fs::remove_all(other);
}

// A read that throws (as a library might) is that sample's error: the batch
// is published, other samples are read, the daemon lives on.
TEST_F(StorageTest, AThrowingReadIsOneSamplesError) {
  counting_.throw_substring = paths_[4].substr(root_.size());
  TestDaemon d(false, Options(false));
  v1::SessionSpec spec = Spec();
  spec.set_on_error(v1::ON_ERROR_ZEROS);
  auto epochs = Read(d, spec, 1);
  ASSERT_EQ(epochs.size(), 1u);
  EXPECT_EQ(epochs[0].errors, 1u);
  EXPECT_EQ(epochs[0].samples, uint64_t{kSamples});
  counting_.throw_substring.clear();
}

// L2 holds other users' bytes: its files are the daemon's alone, whatever
// the umask, and a folder it makes too.
TEST_F(StorageTest, L2FilesAreTheDaemonsAlone) {
  DaemonOptions o = Options(true);
  o.l2.path = l2_ + "/made";
  {
    TestDaemon d(false, o);
    Read(d, Spec(), 1);
  }
  struct stat st;
  ASSERT_EQ(stat(o.l2.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  for (const char* f : {"/data.mdb", "/lock.mdb"}) {
    ASSERT_EQ(stat((o.l2.path + f).c_str(), &st), 0) << f;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << f;
  }
}

TEST_F(StorageTest, TwoSessionsShareOneL1) {
  TestDaemon d(false, Options(false));
  std::vector<ReadSummary> a, b;
  std::thread ta([&] { a = Read(d, Spec(v1::TRANSFORM_TRAIN, 1), 1); });
  std::thread tb([&] { b = Read(d, Spec(v1::TRANSFORM_TRAIN, 2), 1); });
  ta.join();
  tb.join();
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(counting_.reads.load(), uint64_t{kSamples});  // Not 2x.
}

TEST_F(StorageTest, DecodedCacheServesLaterValEpochsWithoutDecoding) {
  TestDaemon d(false, Options(false));
  v1::SessionSpec spec = Spec(v1::TRANSFORM_VAL);
  spec.set_shuffle(false);
  auto epochs = Read(d, spec, 3);
  ASSERT_EQ(epochs.size(), 3u);
  EXPECT_EQ(epochs[0].checksum, epochs[1].checksum);  // Same every epoch.
  EXPECT_EQ(epochs[1].checksum, epochs[2].checksum);
  v1::DaemonStats s = d.daemon()->GetStats();
  const v1::TierStats& decoded = Tier(s, "decoded");
  // Every miss was decoded once and inserted; only samples prefetched for
  // epoch 2 while epoch 1 was still decoding missed a second time, and
  // those found their bytes in L1.
  EXPECT_EQ(decoded.misses(), decoded.inserts());
  EXPECT_GE(decoded.inserts(), uint64_t{kSamples});
  EXPECT_LT(decoded.inserts(), uint64_t{2 * kSamples});
  EXPECT_EQ(Tier(s, "l1").hits(), decoded.inserts() - kSamples);
  EXPECT_GE(decoded.hits(), uint64_t{kSamples});
  EXPECT_EQ(counting_.reads.load(), uint64_t{kSamples});
}

TEST_F(StorageTest, LmdbDatasetMatchesTheFolder) {
  const std::string db = testdata::MakeTempDir("st-lmdb");
  {
    LmdbEnv::Options o;
    o.read_only = false;
    o.map_bytes = 64 << 20;
    auto env = LmdbEnv::Open(db, o);
    ASSERT_TRUE(env.ok()) << env.status();
    ASSERT_TRUE((*env)->WriteTxn([&](MDB_txn* txn, MDB_dbi dbi) -> absl::Status {
      for (const std::string& p : paths_) {
        std::string key = fs::relative(p, root_).string(), bytes;
        EXPECT_TRUE(FileSystem::Default()->ReadFile(p, &bytes, nullptr).ok());
        MDB_val k{key.size(), key.data()}, v{bytes.size(), bytes.data()};
        int rc = mdb_put(txn, dbi, &k, &v, 0);
        if (rc != 0) return LmdbStatus(rc, "put");
      }
      return absl::OkStatus();
    }).ok());
  }
  TestDaemon d(false, Options(false));
  const uint64_t folder = Read(d, Spec(), 1).at(0).checksum;
  v1::SessionSpec spec = Spec();
  spec.mutable_dataset()->mutable_lmdb()->set_path(db);
  counting_.reads = 0;
  EXPECT_EQ(Read(d, spec, 1).at(0).checksum, folder);
  EXPECT_EQ(counting_.reads.load(), 0u);  // Not files.
  // With a manifest choosing labels.
  ASSERT_TRUE(testdata::WriteFile(db + "/labels.tsv",
                                  "class_02/img_0001.jpg\t7\n"
                                  "class_00/img_0003.jpg\t2\n").ok());
  spec.mutable_dataset()->mutable_lmdb()->set_manifest(db + "/labels.tsv");
  spec.set_shuffle(false);
  auto client = d.Connect();
  auto session = client->OpenSession(spec);
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ((*session)->info().dataset_samples(), 2u);
  EXPECT_EQ((*session)->info().num_classes(), 8u);
  auto batch = (*session)->Next(absl::Seconds(30));
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->labels()[0], 7);
  EXPECT_EQ(batch->labels()[1], 2);
  EXPECT_EQ(batch->error_count(), 0u);
  spec.mutable_dataset()->mutable_lmdb()->set_path(db + "/missing");
  EXPECT_EQ(client->OpenSession(spec).status().code(),
            absl::StatusCode::kNotFound);
  fs::remove_all(db);
}

TEST_F(StorageTest, WarmCacheFillsTheTiersWithProgress) {
  TestDaemon d(false, Options(true));
  auto client = d.Connect();
  v1::WarmCacheRequest req;
  *req.mutable_dataset() = Spec().dataset();
  req.set_concurrency(4);
  auto started = client->WarmCache(req);
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(started->total(), uint64_t{kSamples});
  d.daemon()->WaitForWarmJobs();
  auto stats = client->GetStats();
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->warm_jobs_size(), 1);
  const v1::WarmJob& job = stats->warm_jobs(0);
  EXPECT_TRUE(job.finished());
  EXPECT_EQ(job.done(), uint64_t{kSamples});
  EXPECT_EQ(job.source_reads(), uint64_t{kSamples});
  EXPECT_EQ(job.failed(), 0u);
  L2CacheTesting::Flush(*d.daemon()->l2());
  EXPECT_EQ(Tier(d.daemon()->GetStats(), "l2").entries(), uint64_t{kSamples});
  Read(d, Spec(), 1);
  EXPECT_EQ(counting_.reads.load(), uint64_t{kSamples});  // None added.
  req.mutable_dataset()->mutable_folder()->set_path("/no/such/data");
  EXPECT_EQ(client->WarmCache(req).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(StorageTest, InjectedReadErrorsAndShortReadsAreFlaggedSamples) {
  counting_.fail_substring = "img_0002";  // One per class: 3 samples.
  TestDaemon d(false, Options(false));
  auto epochs = Read(d, Spec(), 1);
  ASSERT_EQ(epochs.size(), 1u);
  EXPECT_EQ(epochs[0].errors, 3u);
  EXPECT_EQ(epochs[0].samples, uint64_t{kSamples});
  counting_.fail_substring.clear();
  counting_.short_read_bytes = 200;  // Truncated JPEGs: decode errors.
  TestDaemon d2(false, Options(false));
  auto client = d2.Connect();
  auto session = client->OpenSession(Spec());
  ASSERT_TRUE(session.ok());
  auto batch = (*session)->Next(absl::Seconds(30));
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->error_count(), batch->samples());
  EXPECT_EQ(batch->status()[0], 2u);  // kSampleDecodeError
  counting_.short_read_bytes = -1;
}

}  // namespace
}  // namespace stoker
