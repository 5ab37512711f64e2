#include "server/dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "gtest/gtest.h"
#include "server/plan.h"
#include "tests/testdata.h"

namespace stoker {
namespace {
namespace fs = std::filesystem;

TEST(FolderDatasetTest, SortedClassesLabelsAndSkippedFiles) {
  std::string root = testdata::MakeTempDir("ds");
  fs::create_directories(root + "/b_dog/nested");
  fs::create_directories(root + "/a_cat");
  fs::create_directories(root + "/c_empty");
  for (auto p : {"/a_cat/2.jpg", "/a_cat/1.JPEG", "/b_dog/x.jpeg",
                 "/b_dog/nested/y.jpg", "/b_dog/readme.txt", "/top.txt"}) {
    ASSERT_TRUE(testdata::WriteFile(root + p, "x").ok());
  }
  auto ds = LoadFolderDataset(root);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->num_classes, 3u);
  EXPECT_EQ(ds->class_names, (std::vector<std::string>{"a_cat", "b_dog", "c_empty"}));
  ASSERT_EQ(ds->samples.size(), 4u);
  EXPECT_EQ(ds->samples[0].path, root + "/a_cat/1.JPEG");
  EXPECT_EQ(ds->samples[1].path, root + "/a_cat/2.jpg");
  EXPECT_EQ(ds->samples[0].label, 0);
  EXPECT_EQ(ds->samples[2].path, root + "/b_dog/nested/y.jpg");
  EXPECT_EQ(ds->samples[3].label, 1);
  EXPECT_EQ(ds->skipped_files, 2u);  // readme.txt and top.txt
  fs::remove_all(root);
}

TEST(FolderDatasetTest, MissingAndEmptyAreDistinctErrors) {
  auto missing = LoadFolderDataset("/nonexistent/stoker/data");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/stoker/data"),
            std::string::npos);
  std::string root = testdata::MakeTempDir("empty");
  fs::create_directories(root + "/cls");
  EXPECT_EQ(LoadFolderDataset(root).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(testdata::WriteFile(root + "/file", "x").ok());
  EXPECT_EQ(LoadFolderDataset(root + "/file").status().code(),
            absl::StatusCode::kFailedPrecondition);
  fs::remove_all(root);
}

TEST(ListDatasetTest, ParsesManifestAndReportsBadLine) {
  std::string root = testdata::MakeTempDir("list");
  ASSERT_TRUE(testdata::WriteFile(root + "/m.tsv",
                                  "# comment\nimgs/a.jpg\t3\n\nimgs/b.jpg\t0\n")
                  .ok());
  auto ds = LoadListDataset(root + "/m.tsv", "");
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->samples.size(), 2u);
  EXPECT_EQ(ds->samples[0].path, root + "/imgs/a.jpg");
  EXPECT_EQ(ds->samples[0].label, 3);
  EXPECT_EQ(ds->num_classes, 4u);
  auto rooted = LoadListDataset(root + "/m.tsv", "/data");
  ASSERT_TRUE(rooted.ok());
  EXPECT_EQ(rooted->samples[1].path, "/data/imgs/b.jpg");

  ASSERT_TRUE(testdata::WriteFile(root + "/bad.tsv", "a.jpg\t1\nb.jpg cat\n").ok());
  auto bad = LoadListDataset(root + "/bad.tsv", "");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos);
  // A file that is no manifest (a password file, a process environment):
  // the error names the line, never its content.
  ASSERT_TRUE(testdata::WriteFile(
                  root + "/shadow",
                  std::string("root:$6$SECRETHASH:19000:0:99999:7:::\n") +
                      std::string("HOME=/root\0TOKEN=SECRETTOKEN\0", 30))
                  .ok());
  auto leak = LoadListDataset(root + "/shadow", "");
  EXPECT_EQ(leak.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(leak.status().message().find("line 1"), std::string::npos);
  EXPECT_EQ(leak.status().message().find("SECRET"), std::string::npos)
      << leak.status();
  EXPECT_EQ(leak.status().message().find("root:"), std::string::npos);
  EXPECT_EQ(LoadListDataset(root + "/none.tsv", "").status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(testdata::WriteFile(root + "/blank.tsv", "# nothing\n").ok());
  EXPECT_EQ(LoadListDataset(root + "/blank.tsv", "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  fs::remove_all(root);
}

// Manifests come through the file environment: nothing but a regular file
// of bounded size, lines and line length is read, and a confined caller's
// manifest must lie beneath its folder.
TEST(ListDatasetTest, ManifestsAreReadWithinLimits) {
  std::string root = testdata::MakeTempDir("list-limits");
  EXPECT_EQ(LoadListDataset("/dev/zero", root).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(mkfifo((root + "/fifo.tsv").c_str(), 0644), 0);
  EXPECT_EQ(LoadListDataset(root + "/fifo.tsv", "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(testdata::WriteFile(root + "/m.tsv", "a.jpg\t1\nb.jpg\t2\nc.jpg\t3\n").ok());
  ScanLimits limits;
  limits.max_files = 2;
  auto lines = LoadListDataset(root + "/m.tsv", "", limits);
  EXPECT_EQ(lines.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(lines.status().message().find("line 3"), std::string::npos) << lines.status();
  limits = ScanLimits();
  limits.max_line_bytes = 7;
  EXPECT_EQ(LoadListDataset(root + "/m.tsv", "", limits).status().code(),
            absl::StatusCode::kOk);
  limits.max_line_bytes = 6;
  EXPECT_EQ(LoadListDataset(root + "/m.tsv", "", limits).status().code(),
            absl::StatusCode::kResourceExhausted);
  limits = ScanLimits();
  limits.max_file_bytes = 10;
  EXPECT_EQ(LoadListDataset(root + "/m.tsv", "", limits).status().code(),
            absl::StatusCode::kResourceExhausted);
  // Confined to a sub-folder: a manifest outside it is refused.
  fs::create_directories(root + "/in");
  ASSERT_TRUE(testdata::WriteFile(root + "/in/m.tsv", "a.jpg\t1\n").ok());
  Beneath in;
  in.dir_fd = open((root + "/in").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  in.prefix = root + "/in";
  limits = ScanLimits();
  limits.within = &in;
  EXPECT_TRUE(LoadListDataset(root + "/in/m.tsv", "", limits).ok());
  EXPECT_EQ(LoadListDataset(root + "/m.tsv", root + "/in", limits).status().code(),
            absl::StatusCode::kPermissionDenied);
  fs::remove_all(root);
}

// An LMDB dataset is mapped read-only from its confined data file: no lock
// file is created (the folder may be read-only), none is followed.
TEST(LmdbDatasetTest, OpensWithoutALockFile) {
  std::string root = testdata::MakeTempDir("lmdb-nolock");
  {
    LmdbEnv::Options w;
    w.read_only = false;
    w.map_bytes = 1 << 20;
    auto env = LmdbEnv::Open(root, w);
    ASSERT_TRUE(env.ok()) << env.status();
    ASSERT_TRUE((*env)->WriteTxn([](MDB_txn* txn, MDB_dbi dbi) {
      std::string k = "cls/a", v = "bytes";
      MDB_val key{k.size(), k.data()}, val{v.size(), v.data()};
      return LmdbStatus(mdb_put(txn, dbi, &key, &val, 0), "put");
    }).ok());
  }
  fs::remove(root + "/lock.mdb");
  // A lock file that is a symlink to something else is never touched.
  fs::create_symlink(root + "/elsewhere", root + "/lock.mdb");
  auto ds = LoadLmdbDataset(root, "");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->samples.size(), 1u);
  EXPECT_FALSE(fs::exists(root + "/elsewhere"));
  std::string value;
  ASSERT_TRUE(ds->lmdb->Get("cls/a", &value).ok());
  EXPECT_EQ(value, "bytes");
  EXPECT_FALSE(ds->lmdb_identity.empty());
  // The data file must be a regular file.
  fs::remove(root + "/data.mdb");
  ASSERT_EQ(mkfifo((root + "/data.mdb").c_str(), 0644), 0);
  EXPECT_EQ(LoadLmdbDataset(root, "").status().code(), absl::StatusCode::kFailedPrecondition);
  fs::remove_all(root);
}

PlanSpec Spec(uint64_t n, uint32_t b, uint32_t rank = 0, uint32_t world = 1) {
  PlanSpec s;
  s.num_samples = n;
  s.batch_size = b;
  s.rank = rank;
  s.world_size = world;
  return s;
}

TEST(PlanTest, BatchCountsFollowDataLoaderSemantics) {
  auto p = EpochPlan::Create(Spec(10, 4));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->batches_per_epoch(), 3u);
  EXPECT_EQ(p->samples_per_epoch(), 10u);
  EXPECT_EQ(p->RankOrder(0), (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  PlanSpec s = Spec(10, 4);
  s.drop_last = true;
  p = EpochPlan::Create(s);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->batches_per_epoch(), 2u);
  EXPECT_EQ(p->samples_per_epoch(), 8u);
  EXPECT_EQ(p->RankOrder(0).size(), 8u);
}

TEST(PlanTest, InvalidSpecs) {
  EXPECT_EQ(EpochPlan::Create(Spec(10, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EpochPlan::Create(Spec(10, 2, 2, 2)).status().code(),
            absl::StatusCode::kInvalidArgument);
  PlanSpec s = Spec(3, 4);
  s.drop_last = true;
  EXPECT_EQ(EpochPlan::Create(s).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(PlanTest, ShuffleIsDeterministicPermutationPerEpochAndSeed) {
  PlanSpec s = Spec(1000, 10);
  s.shuffle = true;
  s.seed = 5;
  auto p = EpochPlan::Create(s);
  ASSERT_TRUE(p.ok());
  auto e0 = p->RankOrder(0), e0b = p->RankOrder(0), e1 = p->RankOrder(1);
  EXPECT_EQ(e0, e0b);
  EXPECT_NE(e0, e1);
  std::vector<uint64_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  s.seed = 6;
  EXPECT_NE(EpochPlan::Create(s)->RankOrder(0), e0);
}

TEST(FolderDatasetTest, SymlinkLoopsAreAnErrorNamingTheLoop) {
  std::string root = testdata::MakeTempDir("loop");
  fs::create_directories(root + "/a/sub");
  for (auto p : {"/a/1.jpg", "/a/sub/2.jpg", "/a/sub/3.jpg"}) {
    ASSERT_TRUE(testdata::WriteFile(root + p, "x").ok());
  }
  // Two loops: back to the class folder and back to the dataset root.
  fs::create_directory_symlink("..", root + "/a/sub/up");
  fs::create_directory_symlink("../..", root + "/a/sub/top");
  auto ds = LoadFolderDataset(root);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(ds.status().message().find("symlink loop"), std::string::npos)
      << ds.status();
  EXPECT_NE(ds.status().message().find(root + "/a/sub/"), std::string::npos);
  // A symlink to a sibling folder is no loop: its files count.
  fs::remove(root + "/a/sub/up");
  fs::remove(root + "/a/sub/top");
  fs::create_directories(root + "/b");
  fs::create_directory_symlink("../a/sub", root + "/b/alias");
  ds = LoadFolderDataset(root);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->samples.size(), 5u);
  fs::remove_all(root);
}

TEST(FolderDatasetTest, ScanLimitsAndCancellation) {
  std::string root = testdata::MakeTempDir("limits");
  fs::create_directories(root + "/c");
  for (int i = 0; i < 3000; ++i) {
    ASSERT_TRUE(testdata::WriteFile(root + "/c/" + std::to_string(i) + ".jpg", "x").ok());
  }
  ScanLimits limits;
  limits.max_files = 1000;
  auto ds = LoadFolderDataset(root, limits);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(ds.status().message().find("more than 1000 entries"), std::string::npos);
  std::atomic<bool> cancel{true};
  limits = ScanLimits();
  limits.cancel = &cancel;
  EXPECT_EQ(LoadFolderDataset(root, limits).status().code(),
            absl::StatusCode::kCancelled);
  limits.cancel = nullptr;
  limits.max_time = absl::ZeroDuration();
  EXPECT_EQ(LoadFolderDataset(root, limits).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(LoadFolderDataset(root).value().samples.size(), 3000u);
  fs::remove_all(root);
}

TEST(PlanTest, RanksCoverEpochExactlyOnceOrPadLikeDistributedSampler) {
  for (uint64_t n : {12u, 13u}) {
    std::map<uint64_t, int> seen;
    uint64_t per_rank = 0;
    for (uint32_t r = 0; r < 3; ++r) {
      PlanSpec s = Spec(n, 2, r, 3);
      s.shuffle = true;
      s.seed = 9;
      auto p = EpochPlan::Create(s);
      ASSERT_TRUE(p.ok());
      if (r == 0) per_rank = p->samples_per_epoch();
      EXPECT_EQ(p->samples_per_epoch(), per_rank);  // Equal across ranks.
      for (uint64_t i : p->RankOrder(4)) seen[i]++;
    }
    EXPECT_EQ(seen.size(), n);  // Every sample delivered.
    int dup = 0;
    for (auto& [i, c] : seen) dup += c - 1;
    EXPECT_EQ(dup, n % 3 == 0 ? 0 : 3 - static_cast<int>(n % 3));
  }
}

}  // namespace
}  // namespace stoker
