#include "client/cpp/dataset_spec.h"

#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "proto/spec_util.h"
#include "tests/testdata.h"

namespace stoker {
namespace {
namespace fs = std::filesystem;

// The kind a path names, as the spec's key.
std::string KindOf(const absl::StatusOr<v1::DatasetSpec>& ds) {
  if (!ds.ok()) return std::string(absl::StatusCodeToString(ds.status().code()));
  return ds->GetDescriptor()->FindFieldByNumber(ds->source_case())->name();
}

TEST(NameDatasetTest, PathsAreRecognisedByContentThenSuffixInAnyCase) {
  const std::string dir = testdata::MakeTempDir("name-dataset");
  fs::create_directories(dir + "/images/cat");
  fs::create_directories(dir + "/db");
  ASSERT_TRUE(testdata::WriteFile(dir + "/db/data.mdb", "lmdb").ok());
  ASSERT_TRUE(testdata::WriteFile(dir + "/rows.NPY", "\x93NUMPY").ok());
  ASSERT_TRUE(testdata::WriteFile(dir + "/rows.bin", "\x93NUMPY\x01\x00").ok());
  ASSERT_TRUE(testdata::WriteFile(dir + "/feats.H5", "anything").ok());
  ASSERT_TRUE(testdata::WriteFile(dir + "/feats.bin", std::string("\x89HDF\r\n\x1a\n", 8)).ok());
  ASSERT_TRUE(testdata::WriteFile(dir + "/train.tsv", "cat/a.jpg\t0\n").ok());
  EXPECT_EQ(KindOf(NameDataset(dir + "/images", "")), "folder");
  EXPECT_EQ(KindOf(NameDataset(dir + "/missing", "")), "folder");  // The daemon says so.
  EXPECT_EQ(KindOf(NameDataset(dir + "/db/", "")), "lmdb");
  EXPECT_EQ(KindOf(NameDataset(dir + "/rows.NPY", "")), "npy");
  EXPECT_EQ(KindOf(NameDataset(dir + "/rows.bin", "")), "npy");
  EXPECT_EQ(KindOf(NameDataset(dir + "/train.tsv", "")), "list");
  for (const char* h5 : {"/feats.H5", "/feats.bin"}) {
    auto ds = NameDataset(dir + h5, "");
    EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(ds.status().message().find("\"hdf5\": {\"path\""), std::string::npos)
        << ds.status();
  }
  // One picture, by name or by content: said to be no dataset.
  ASSERT_TRUE(testdata::WriteFile(dir + "/cat.JPG", "anything").ok());
  ASSERT_TRUE(testdata::WriteFile(dir + "/photo", "\xff\xd8\xff\xe0 jfif").ok());
  ASSERT_TRUE(testdata::WriteFile(dir + "/mask", "\x89PNG\r\n\x1a\n").ok());
  for (const char* picture : {"/cat.JPG", "/photo", "/mask"}) {
    auto ds = NameDataset(dir + picture, "");
    EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument) << picture;
    EXPECT_NE(ds.status().message().find("is one picture, not a dataset"), std::string::npos)
        << ds.status();
  }
  // Folders by their first file that names or starts as an array kind.
  fs::create_directories(dir + "/arrays");
  ASSERT_TRUE(testdata::WriteFile(dir + "/arrays/README", "rows of features").ok());
  ASSERT_TRUE(testdata::WriteFile(dir + "/arrays/part0", "\x93NUMPY\x01\x00").ok());
  EXPECT_EQ(KindOf(NameDataset(dir + "/arrays", "")), "npy");
  fs::create_directories(dir + "/store");
  ASSERT_TRUE(testdata::WriteFile(dir + "/store/part0.H5", "anything").ok());
  auto store = NameDataset(dir + "/store", "");
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(store.status().message().find("holds HDF5 files"), std::string::npos) << store.status();
  fs::create_directories(dir + "/scans");
  ASSERT_TRUE(testdata::WriteFile(dir + "/scans/a.NII.GZ", "\x1f\x8b").ok());
  EXPECT_EQ(KindOf(NameDataset(dir + "/scans", "")), "nifti");
  // A gzip archive beside class folders is not a volume.
  ASSERT_TRUE(testdata::WriteFile(dir + "/images/meta.tar.gz", "\x1f\x8b").ok());
  EXPECT_EQ(KindOf(NameDataset(dir + "/images", "")), "folder");
  // WebDataset shards: a .tar file, a folder of them, a pattern.
  fs::create_directories(dir + "/shards");
  ASSERT_TRUE(testdata::WriteFile(dir + "/shards/train-000000.TAR", "tar").ok());
  ASSERT_TRUE(testdata::WriteFile(dir + "/shards/README", "shards").ok());
  EXPECT_EQ(KindOf(NameDataset(dir + "/shards/train-000000.TAR", "")), "webdataset");
  EXPECT_EQ(KindOf(NameDataset(dir + "/shards", "")), "webdataset");
  auto pattern = NameDataset(dir + "/shards/train-{000000..000009}.tar", "");
  ASSERT_TRUE(pattern.ok()) << pattern.status();
  EXPECT_EQ(pattern->webdataset().path(), dir + "/shards");
  EXPECT_EQ(pattern->webdataset().shards(), "train-{000000..000009}.tar");
  // An object store's URL, kept as it is (not a path made absolute), and
  // naming no local folder to prove.
  auto s3 = NameDataset("s3://bucket/imagenet/train/", "");
  ASSERT_TRUE(s3.ok()) << s3.status();
  EXPECT_EQ(s3->s3().url(), "s3://bucket/imagenet/train/");
  EXPECT_EQ(DatasetFolder(*s3), "");
  EXPECT_EQ(NameDataset("s3://bucket/train/", dir).status().code(),
            absl::StatusCode::kInvalidArgument);  // No root for an object store.
  // Shards there by pattern: the URL as it is (the daemon's kind splits it).
  auto shards = NameDataset("s3://bucket/shards/train-{000000..000009}.tar", "");
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_EQ(shards->s3().url(), "s3://bucket/shards/train-{000000..000009}.tar");
  // A manifest in the bucket is a URL too; a local one a path, whose
  // folder the client proves.
  auto in_bucket = NameDataset(
      R"({"s3": {"url": "s3://bucket/train/", "manifest": "s3://bucket/lists/train.tsv"}})", "");
  ASSERT_TRUE(in_bucket.ok()) << in_bucket.status();
  EXPECT_EQ(in_bucket->s3().manifest(), "s3://bucket/lists/train.tsv");
  EXPECT_EQ(DatasetFolder(*in_bucket), "");
  ASSERT_TRUE(testdata::WriteFile(dir + "/lists.tsv", "cat/1.jpg\t0\n").ok());
  auto local = NameDataset(
      absl::StrCat(R"({"s3": {"url": "s3://bucket/train/", "manifest": ")", dir, R"(/lists.tsv"}})"),
      "");
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(DatasetPath(*local), dir + "/lists.tsv");
  EXPECT_EQ(DatasetFolder(*local), dir);
  // root: a manifest's folder, and nothing else's.
  auto list = NameDataset(dir + "/train.tsv", dir + "/images");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->list().root(), dir + "/images");
  EXPECT_EQ(NameDataset(dir + "/images", dir).status().code(),
            absl::StatusCode::kInvalidArgument);
  fs::remove_all(dir);
}

TEST(NameDatasetTest, JsonNamesOneSourceAndPathsBecomeAbsolute) {
  const std::string dir = testdata::MakeTempDir("name-json");
  const std::string cwd = fs::current_path();
  ASSERT_EQ(chdir(dir.c_str()), 0);
  auto ds = NameDataset(R"({"lmdb": {"path": "db/../db", "manifest": "m.tsv"}})", "");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->lmdb().path(), dir + "/db");
  EXPECT_EQ(ds->lmdb().manifest(), dir + "/m.tsv");
  // An HDF5 dataset's name and labels are names inside the file, not paths.
  ds = NameDataset(R"({"hdf5": {"path": "f.h5", "dataset": "x", "labels": "y"}})", "");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->hdf5().path(), dir + "/f.h5");
  EXPECT_EQ(ds->hdf5().dataset(), "x");
  EXPECT_EQ(ds->hdf5().labels(), "y");
  ds = NameDataset(R"({"npy": {"path": "x.npy", "labels": "y.npy"}})", "");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->npy().labels(), dir + "/y.npy");
  ds = NameDataset(R"({"list": {"path": "m.tsv"}})", "imgs");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->list().root(), dir + "/imgs");
  // The spec's own fields beside the source.
  ds = NameDataset(R"({"hdf5": {"path": "v", "dataset": "x"}, "samples_per_volume": 8})", "");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->samples_per_volume(), 8u);
  EXPECT_EQ(ds->hdf5().path(), dir + "/v");
  EXPECT_EQ(NameDataset(R"({"folder": {"path": "a"}, "npy": {"path": "b"}})", "")
                .status()
                .message(),
            absl::StrCat("a dataset names one source: ", DatasetSourceNames(),
                         ", got folder and npy"));
  // Not one source: named errors.
  for (const char* bad : {R"({})", R"({"folder": {"path": "a"}, "npy": {"path": "b"}})",
                          R"({"tar": {"path": "a"}})", R"({"folder": {"pth": "a"}})",
                          R"({"folder": )", R"({"root_token": "x"})"}) {
    auto r = NameDataset(bad, "");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(NameDataset(R"({"tar": {}})", "").status().message().find("tar"), std::string::npos);
  EXPECT_EQ(NameDataset("", "").status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_EQ(chdir(cwd.c_str()), 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stoker
