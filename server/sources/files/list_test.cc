#include "server/sources/files/list.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "server/access/memory_budget.h"
#include "tests/testdata.h"

namespace stoker {
namespace {
namespace fs = std::filesystem;

// A manifest of many lines under a long root builds its paths against the
// caller's budget for sample lists: refused while being built, at about the
// budget, and the charge is given back with the list.
TEST(ListDatasetTest, PathsAreChargedToTheCallersBudget) {
  std::string root = testdata::MakeTempDir("list-budget");
  std::string lines;
  for (int i = 0; i < 200000; ++i) lines += "a/" + std::to_string(i) + ".jpg\t1\n";
  ASSERT_TRUE(testdata::WriteFile(root + "/m.tsv", lines).ok());
  const std::string long_root = "/" + std::string(1000, 'r');
  MemoryBudget budget(UINT64_MAX, 64 << 20);
  ScanLimits limits;
  limits.charge_list = [&](uint64_t bytes) { return budget.Charge(7, bytes); };
  auto big = LoadListDataset(root + "/m.tsv", long_root, limits);  // About 210 MB of paths.
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted) << big.status();
  EXPECT_NE(big.status().message().find("--max-list-bytes-per-user"), std::string::npos);
  EXPECT_EQ(budget.used_by(7), 0u);  // Nothing held after the refusal.
  {
    auto fits = LoadListDataset(root + "/m.tsv", "/d", limits);  // About 16 MB.
    ASSERT_TRUE(fits.ok()) << fits.status();
    EXPECT_EQ(fits->samples.size(), 200000u);
    EXPECT_GE(budget.used_by(7), 200000 * (sizeof(Sample) + 10));
  }
  EXPECT_EQ(budget.used_by(7), 0u);
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

}  // namespace
}  // namespace stoker
