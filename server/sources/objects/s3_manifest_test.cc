#include "server/sources/objects/s3_manifest.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "server/dataset/sample_source.h"
#include "server/objstore/moto_testing.h"
#include "server/sources/objects/s3_shards.h"
#include "server/sources/source.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

using moto_testing::Content;

class S3ManifestTest : public moto_testing::BucketTest {
 protected:
  void SetUp() override {
    BucketTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    objects_ = {{"data/cat/1.jpg", Content(5000, 1)},    {"data/cat/deep/2.PNG", Content(300, 2)},
                {"data/dog/3.JPEG", Content(70000, 3)},  {"data/dog/3.mask.png", Content(40, 7)},
                {"data/cat/1.mask.png", Content(30, 8)}, {"data/eel.png", Content(999, 5)},
                {"elsewhere/6.jpg", Content(10, 6)}};
    for (const auto& [key, value] : objects_) ASSERT_TRUE(Put(key, value).ok()) << key;
    for (int s = 0; s < 2; ++s) {
      testdata::TarWriter t;
      for (int i = 0; i < 3; ++i) {
        t.Add(absl::StrCat("s", s, "_", i, ".jpg"), absl::StrCat("picture ", s, ".", i))
            .Add(absl::StrCat("s", s, "_", i, ".cls"), absl::StrCat(10 * s + i));
      }
      ASSERT_TRUE(Put(absl::StrCat("data/shards/", s, ".tar"), t.Close()).ok());
    }
    dir_ = testdata::MakeTempDir("s3manifest");
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  absl::StatusOr<Dataset> Open(const std::string& manifest, const ScanLimits& limits = {},
                               const std::vector<std::string>& members = {}) {
    return OpenS3Manifest(*S3Url::Parse("s3://bkt/data"), manifest, access_, client_.get(),
                          limits, {}, {}, members);
  }
  // Each sample's files' bytes and its label.
  std::vector<std::pair<std::vector<std::string>, int>> Read(const Dataset& ds) {
    std::vector<std::pair<std::vector<std::string>, int>> out;
    for (const Sample& s : ds.samples) {
      std::vector<std::string> files;
      for (size_t k = 0; k < ds.files_per_sample; ++k) {
        std::string bytes;
        EXPECT_TRUE(ds.source->Read(s.file(k), &bytes, nullptr).ok()) << s.file(k);
        files.push_back(bytes);
      }
      out.emplace_back(files, s.label);
    }
    return out;
  }

  std::map<std::string, std::string> objects_;
  std::string dir_;
};

TEST_F(S3ManifestTest, AManifestInTheBucketNamesObjectsInItsOrder) {
  ASSERT_TRUE(Put("lists/train.tsv",
                  "# key, label\ndog/3.JPEG\t1\ncat/1.jpg\t3\n\neel.png\ncat/deep/2.PNG\t7\n")
                  .ok());
  absl::StatusOr<Dataset> ds = Open("s3://bkt/lists/train.tsv");
  ASSERT_TRUE(ds.ok()) << ds.status();
  std::vector<std::pair<std::string, int>> got;
  for (const Sample& s : ds->samples) got.emplace_back(s.path, s.label);
  EXPECT_EQ(got, (std::vector<std::pair<std::string, int>>{{"s3://bkt/data/dog/3.JPEG", 1},
                                                           {"s3://bkt/data/cat/1.jpg", 3},
                                                           {"s3://bkt/data/eel.png", 0},
                                                           {"s3://bkt/data/cat/deep/2.PNG", 7}}));
  EXPECT_EQ(ds->files_per_sample, 1u);
  EXPECT_EQ(ds->num_classes, 8u);
  EXPECT_EQ(Read(*ds), (std::vector<std::pair<std::vector<std::string>, int>>{
                           {{objects_["data/dog/3.JPEG"]}, 1},
                           {{objects_["data/cat/1.jpg"]}, 3},
                           {{objects_["data/eel.png"]}, 0},
                           {{objects_["data/cat/deep/2.PNG"]}, 7}}));
  // Each object is proven by the session's own read, as a listed one is.
  absl::StatusOr<Dataset> other = Open("s3://bkt/lists/train.tsv");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_FALSE(other->source->Identify(other->samples[0].path)->proven);
  EXPECT_EQ(other->source->Identify("s3://bkt/elsewhere/6.jpg").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(S3ManifestTest, AKeyNamedTwiceIsOneObjectProvenByItsOwnRead) {
  ASSERT_TRUE(Put("lists/twice.tsv",
                  "cat/1.jpg\tcat/1.mask.png\t0\ncat/1.mask.png\tcat/1.jpg\t1\n"
                  "cat/1.jpg\tcat/1.mask.png\t2\n")
                  .ok());
  absl::StatusOr<Dataset> ds = Open("s3://bkt/lists/twice.tsv");
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->samples.size(), 3u);
  const std::string image = "s3://bkt/data/cat/1.jpg", mask = "s3://bkt/data/cat/1.mask.png";
  EXPECT_EQ(ds->samples[1].path, mask);
  EXPECT_EQ(ds->samples[1].more, std::vector<std::string>{image});
  auto proven = [&](const std::string& path) {
    absl::StatusOr<SourceKey> id = ds->source->Identify(path);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() && id->proven;
  };
  EXPECT_FALSE(proven(image));
  EXPECT_FALSE(proven(mask));
  std::string bytes;
  ASSERT_TRUE(ds->source->Read(image, &bytes, nullptr).ok());
  EXPECT_EQ(bytes, objects_["data/cat/1.jpg"]);
  EXPECT_TRUE(proven(image));
  EXPECT_FALSE(proven(mask)) << "only what was read is proven";
  ASSERT_TRUE(ds->source->Read(mask, &bytes, nullptr).ok());
  EXPECT_EQ(bytes, objects_["data/cat/1.mask.png"]);
  EXPECT_TRUE(proven(mask));
}

TEST_F(S3ManifestTest, ALocalManifestIsReadBeneathTheCallersFolder) {
  const std::string manifest = dir_ + "/pairs.tsv";
  ASSERT_TRUE(
      testdata::WriteFile(manifest, "cat/1.jpg\tcat/1.mask.png\t2\ndog/3.JPEG\tdog/3.mask.png\t4\n")
          .ok());
  Beneath in;
  in.dir_fd = open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  in.prefix = dir_;
  ScanLimits confined;
  confined.within = &in;
  absl::StatusOr<Dataset> ds = Open(manifest, confined);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->files_per_sample, 2u);
  EXPECT_EQ(Read(*ds), (std::vector<std::pair<std::vector<std::string>, int>>{
                           {{objects_["data/cat/1.jpg"], objects_["data/cat/1.mask.png"]}, 2},
                           {{objects_["data/dog/3.JPEG"], objects_["data/dog/3.mask.png"]}, 4}}));
  // A file outside the folder the caller proved is not read.
  const std::string outside = testdata::MakeTempDir("s3manifest-outside") + "/m.tsv";
  ASSERT_TRUE(testdata::WriteFile(outside, "cat/1.jpg\t0\n").ok());
  absl::Status s = Open(outside, confined).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  std::filesystem::remove_all(std::filesystem::path(outside).parent_path());
}

TEST_F(S3ManifestTest, AManifestOfTarKeysListsShardsInItsOrder) {
  ASSERT_TRUE(Put("lists/shards.txt", "shards/1.tar\nshards/0.tar\n").ok());
  absl::StatusOr<Dataset> ds = Open("s3://bkt/lists/shards.txt");
  ASSERT_TRUE(ds.ok()) << ds.status();
  std::vector<std::pair<std::vector<std::string>, int>> want;
  for (int s : {1, 0}) {
    for (int i = 0; i < 3; ++i) want.push_back({{absl::StrCat("picture ", s, ".", i)}, 10 * s + i});
  }
  EXPECT_EQ(Read(*ds), want);
  EXPECT_EQ(ds->first_epoch_windows, (std::vector<uint64_t>{3, 3}));
  // A member kept by each sample is its further file; a manifest of
  // objects has none to keep.
  ds = Open("s3://bkt/lists/shards.txt", {}, {"cls"});
  ASSERT_TRUE(ds.ok()) << ds.status();
  for (auto& [files, label] : want) files.push_back(absl::StrCat(label));
  EXPECT_EQ(Read(*ds), want);
  ASSERT_TRUE(Put("lists/train.tsv", "cat/1.jpg\t3\n").ok());
  absl::Status objects = Open("s3://bkt/lists/train.tsv", {}, {"txt"}).status();
  EXPECT_EQ(objects.code(), absl::StatusCode::kInvalidArgument) << objects;
  EXPECT_NE(objects.message().find("holds objects, not WebDataset shards: member 'txt'"),
            std::string::npos)
      << objects;
  ASSERT_TRUE(Put("lists/missing.txt", "shards/0.tar\nshards/2.tar\n").ok());
  absl::Status s = Open("s3://bkt/lists/missing.txt").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("shards/2.tar (the manifest names it)"), std::string::npos) << s;
}

TEST_F(S3ManifestTest, ManifestsThatLieOrPassTheCapsAreRefusedByName) {
  auto refused = [&](const std::string& text, const ScanLimits& limits = {}) {
    EXPECT_TRUE(Put("lists/bad.tsv", text).ok());
    return Open("s3://bkt/lists/bad.tsv", limits).status();
  };
  absl::Status s = refused("cat/1.jpg\t0\nno/such.jpg\t1\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("sample 2: no object s3://bkt/data/no/such.jpg"), std::string::npos)
      << s;
  s = refused("cat/1.jpg\t0\ncat/1.jpg\tcat/1.mask.png\t1\n");  // Columns differ.
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("line 2"), std::string::npos) << s;
  EXPECT_EQ(s.message().find("mask"), std::string::npos) << "never the line's text: " << s;
  s = refused("cat/1.jpg\t0\nshards/0.tar\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(refused("# nothing\n").code(), absl::StatusCode::kFailedPrecondition);
  ScanLimits small;
  small.max_file_bytes = 10;
  s = refused("cat/1.jpg\t0\n", small);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  ScanLimits few;
  few.max_files = 1;
  EXPECT_EQ(refused("cat/1.jpg\t0\ndog/3.JPEG\t1\n", few).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Open("s3://bkt/lists/none.tsv").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(S3ManifestTest, TheKindTakesAManifestAndRefusesOneWithShardsNamedToo) {
  ASSERT_TRUE(Put("lists/train.tsv", "cat/1.jpg\t4\n").ok());
  SourceContext ctx;
  ctx.objects = client_.get();
  ctx.access = std::make_shared<ObjectStoreAccess>(access_);
  v1::DatasetSpec spec;
  spec.mutable_s3()->set_url("s3://bkt/data/");
  spec.mutable_s3()->set_manifest("s3://bkt/lists/train.tsv");
  absl::StatusOr<Dataset> ds = OpenDataset(spec, ctx);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->samples.size(), 1u);
  EXPECT_EQ(ds->samples[0].label, 4);
  for (const char* url : {"s3://bkt/data/shards/{0..1}.tar", "s3://bkt/data/shards/0.tar"}) {
    spec.mutable_s3()->set_url(url);
    EXPECT_EQ(OpenDataset(spec, ctx).status().code(), absl::StatusCode::kInvalidArgument) << url;
  }
  spec.mutable_s3()->set_url("s3://bkt/data/");
  spec.mutable_s3()->set_shards("shards/{0..1}.tar");
  EXPECT_EQ(OpenDataset(spec, ctx).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stoker
