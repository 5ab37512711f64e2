#include "server/sources/files/folder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"
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
  // ImageFolder's order: a folder's own files before its sub-folders'.
  EXPECT_EQ(ds->samples[2].path, root + "/b_dog/x.jpeg");
  EXPECT_EQ(ds->samples[3].path, root + "/b_dog/nested/y.jpg");
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
  // Pictures with no class folder: the message says what a folder is.
  fs::remove(root + "/cls");
  for (auto p : {"/1.jpg", "/2.JPG", "/3.png"}) {
    ASSERT_TRUE(testdata::WriteFile(root + p, "x").ok());
  }
  absl::Status flat = LoadFolderDataset(root).status();
  EXPECT_EQ(flat.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(flat.message().find("has no class folders but 3 images at its top"),
            std::string::npos) << flat;
  EXPECT_NE(flat.message().find("/<class>/<image>"), std::string::npos) << flat;
  fs::remove_all(root);
}

// Class folders that are symlinks out of a confined dataset's folder, as a
// subset is assembled: followed, with their files' labels.
TEST(FolderDatasetTest, SymlinkedClassFoldersOutOfTheFolderAreFollowed) {
  std::string root = testdata::MakeTempDir("linked");
  for (auto p : {"/store/ant/1.jpg", "/store/ant/2.jpg", "/store/bee/3.jpg"}) {
    fs::create_directories(fs::path(root + p).parent_path());
    ASSERT_TRUE(testdata::WriteFile(root + p, "x").ok());
  }
  fs::create_directories(root + "/subset");
  fs::create_directory_symlink(root + "/store/ant", root + "/subset/a");
  fs::create_directory_symlink("../store/bee", root + "/subset/b");
  Beneath in;
  in.dir_fd = open((root + "/subset").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  in.prefix = root + "/subset";
  ScanLimits limits;
  limits.within = &in;
  auto ds = LoadFolderDataset(root + "/subset", limits);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->class_names, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(ds->samples.size(), 3u);
  EXPECT_EQ(ds->samples[1].path, root + "/subset/a/2.jpg");
  EXPECT_EQ(ds->samples[2].path, root + "/subset/b/3.jpg");
  EXPECT_EQ(ds->samples[2].label, 1);
  fs::remove_all(root);
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

}  // namespace
}  // namespace stoker
