// The webdataset source: shards named by pattern, folder or file, samples
// and labels as WebDataset groups them, members read through the caller's
// confinement, and shards that lie, are FIFOs, lead outside the folder or
// change after indexing: each an error naming the shard.
#include "server/sources/shards/webdataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "server/sources/source.h"
#include "tests/testdata.h"

namespace stoker {
namespace {
namespace fs = std::filesystem;

std::vector<std::string> Names(const std::string& pattern, uint64_t max = 100) {
  absl::StatusOr<ShardPattern> p = ShardPattern::Parse(pattern, max);
  EXPECT_TRUE(p.ok()) << p.status();
  std::vector<std::string> out;
  for (uint64_t i = 0; p.ok() && i < p->size(); ++i) out.push_back(p->Name(i));
  return out;
}

absl::StatusCode Refused(const std::string& pattern, uint64_t max = 100) {
  return ShardPattern::Parse(pattern, max).status().code();
}

TEST(ShardPatternTest, RangesStandForTheirNamesInOrderKeepingTheirWidth) {
  EXPECT_EQ(Names("train-{000008..000011}.tar"),
            (std::vector<std::string>{"train-000008.tar", "train-000009.tar",
                                      "train-000010.tar", "train-000011.tar"}));
  EXPECT_EQ(Names("r{0..1}/s{8..9}.tar"),
            (std::vector<std::string>{"r0/s8.tar", "r0/s9.tar", "r1/s8.tar", "r1/s9.tar"}));
  EXPECT_EQ(Names("one.tar"), std::vector<std::string>{"one.tar"});
  // Millions of names cost nothing until asked for.
  absl::StatusOr<ShardPattern> big = ShardPattern::Parse("s-{0000000..9999999}.tar", 20'000'000);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->size(), 10'000'000u);
  EXPECT_EQ(big->Name(1234567), "s-1234567.tar");
}

TEST(ShardPatternTest, PatternsThatLieAreRefused) {
  for (const char* bad :
       {"{a..b}", "x-{3..1}.tar", "x-{1..3.tar", "x-1..3}.tar", "x}{1..2}"}) {
    EXPECT_EQ(Refused(bad), absl::StatusCode::kInvalidArgument) << bad;
  }
  // More names than the dataset may list, however they multiply (and a
  // range of the whole 64-bit span, which would wrap).
  EXPECT_EQ(Refused("x-{0..99999999999}.tar", 1000), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Refused("{0..99}{0..99}", 1000), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Refused("{0..18446744073709551615}"), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Names("{18446744073709551615..18446744073709551615}{0..3}").size(), 4u);
  // A pattern of thousands of ranges, or megabytes: refused before any work.
  std::string ranges;
  for (int i = 0; i < 30000; ++i) ranges += "{0..0}";
  EXPECT_EQ(Refused(ranges), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Refused(std::string(5000, 'x')), absl::StatusCode::kInvalidArgument);
}

class WebDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testdata::MakeTempDir("wds");
    // Two shards of 3 samples: image, label, mask (and a json beside).
    for (int s = 0; s < 2; ++s) {
      testdata::TarWriter t;
      for (int i = 0; i < 3; ++i) {
        const std::string key = absl::StrFormat("sample%02d", 3 * s + i);
        t.Add(key + ".JPG", absl::StrCat("image-", 3 * s + i))
            .Add(key + ".cls", absl::StrCat(3 * s + i, "\n"))
            .Add(key + ".json", "{}")
            .Add(key + ".seg.png", absl::StrCat("mask-", 3 * s + i));
      }
      t.Add("readme.txt", "not a sample");
      ASSERT_TRUE(testdata::WriteFile(Shard(s), t.Close()).ok());
    }
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string Shard(int s) const { return absl::StrFormat("%s/train-%06d.tar", root_, s); }

  SourceContext Confined() const {
    auto in = std::make_shared<Beneath>();
    in->dir_fd = open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    in->prefix = root_;
    SourceContext ctx;
    ctx.beneath = in;
    return ctx;
  }
  static v1::DatasetSpec Spec(const std::string& path, const std::string& shards = "") {
    v1::DatasetSpec spec;
    spec.mutable_webdataset()->set_path(path);
    spec.mutable_webdataset()->set_shards(shards);
    return spec;
  }

  std::string root_;
};

TEST_F(WebDatasetTest, SamplesLabelsAndMasksFromShardsByPatternFolderOrFile) {
  for (const v1::DatasetSpec& spec :
       {Spec(root_, "train-{000000..000001}.tar"), Spec(root_), Spec(root_ + "/")}) {
    auto ds = OpenDataset(spec, Confined());
    ASSERT_TRUE(ds.ok()) << ds.status();
    ASSERT_EQ(ds->samples.size(), 6u);
    EXPECT_EQ(ds->files_per_sample, 2u);  // Every sample has its seg.png.
    EXPECT_EQ(ds->num_classes, 6u);
    EXPECT_EQ(ds->skipped_files, 2u);  // The readme of each shard.
    for (int i = 0; i < 6; ++i) {
      const Sample& s = ds->samples[i];
      EXPECT_EQ(s.label, i);
      std::string bytes;
      ASSERT_TRUE(ds->source->Read(s.file(0), &bytes, nullptr).ok()) << s.file(0);
      EXPECT_EQ(bytes, absl::StrCat("image-", i));
      absl::StatusOr<SourceKey> id = ds->source->Identify(s.file(1));
      ASSERT_TRUE(id.ok()) << id.status();
      ASSERT_TRUE(ds->source->ReadIdentified(*id, s.file(1), &bytes, nullptr).ok());
      EXPECT_EQ(bytes, absl::StrCat("mask-", i));
    }
    // Members of one shard: one file, their own entries.
    auto a = ds->source->Identify(ds->samples[0].path);
    auto b = ds->source->Identify(ds->samples[1].path);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->version.inode, b->version.inode);
    EXPECT_NE(a->key(), b->key());
  }
  auto one = OpenDataset(Spec(Shard(1)), Confined());
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->samples.size(), 3u);
  EXPECT_EQ(one->samples[0].label, 3);
  // A name the dataset does not hold.
  EXPECT_EQ(one->source->Read(Shard(1) + "#99", nullptr, nullptr).code(),
            absl::StatusCode::kNotFound);
}

TEST(ShardWindowsTest, LocalSixteensOrInAStoreOneTwoFourEightThenSixteen) {
  const std::vector<size_t> starts = {0, 1, 3, 7, 15, 31, 47};
  for (size_t w = 0; w + 1 < starts.size(); ++w) {
    for (size_t s = starts[w]; s < starts[w + 1]; ++s) EXPECT_EQ(WindowOfShard(s, true), w) << s;
  }
  EXPECT_EQ(WindowOfShard(1000, true), 4 + (1000 - 15) / 16);
  for (size_t s : {0, 15, 16, 31, 32, 1000}) EXPECT_EQ(WindowOfShard(s, false), s / 16) << s;
}

TEST_F(WebDatasetTest, ShardsAreReadInWindowsOfSixteenInTheFirstEpoch) {
  // Shards 2..18 of 1..17 samples, beside shards 0 and 1 (3 each).
  uint64_t first_window = 3 + 3;
  for (int s = 2; s < 19; ++s) {
    testdata::TarWriter t;
    for (int i = 0; i < s - 1; ++i) t.Add(absl::StrFormat("s%02d_%02d.png", s, i), "picture");
    ASSERT_TRUE(testdata::WriteFile(Shard(s), t.Close()).ok());
    if (s < 16) first_window += s - 1;
  }
  auto ds = OpenDataset(Spec(root_, "train-{000000..000018}.tar"), Confined());
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->files_per_sample, 1u);  // Not every sample has a mask now.
  EXPECT_EQ(ds->first_epoch_windows,
            (std::vector<uint64_t>{first_window, 15 + 16 + 17}));  // Shards 16, 17, 18.
  EXPECT_EQ(ds->samples.size(), first_window + 15 + 16 + 17);
  EXPECT_TRUE(ds->samples[0].more.empty());
}

TEST_F(WebDatasetTest, AFileListingShardsNamesThemInItsOrder) {
  ASSERT_TRUE(testdata::WriteFile(root_ + "/shards.txt",
                                  "# newest first\ntrain-000001.tar\n\ntrain-000000.tar\n")
                  .ok());
  auto ds = OpenDataset(Spec(root_ + "/shards.txt"), Confined());
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->samples.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(ds->samples[i].label, (i + 3) % 6) << i;
  // What is not a list of shards, or names one outside the folder.
  for (const auto& [text, code] :
       std::vector<std::pair<std::string, absl::StatusCode>>{
           {"train-000000.tar\nnotes.txt\n", absl::StatusCode::kFailedPrecondition},
           {"# none\n", absl::StatusCode::kFailedPrecondition},
           {"../elsewhere.tar\n", absl::StatusCode::kPermissionDenied}}) {
    ASSERT_TRUE(testdata::WriteFile(root_ + "/bad.txt", text).ok());
    absl::Status s = OpenDataset(Spec(root_ + "/bad.txt"), Confined()).status();
    EXPECT_EQ(s.code(), code) << text << ": " << s;
    EXPECT_EQ(s.message().find("notes"), std::string::npos) << "never the line's text: " << s;
  }
}

TEST_F(WebDatasetTest, HostileShardsAreRefusedByName) {
  // A shard whose member runs past its end.
  testdata::TarWriter t;
  t.Add("a.jpg", "x");
  std::snprintf(&t.bytes()[124], 12, "%011llo", 077777777777ULL);  // 8 GiB, the most 11 digits hold.
  t.Reseal(0);
  ASSERT_TRUE(testdata::WriteFile(root_ + "/bad.tar", t.Close()).ok());
  auto bad = OpenDataset(Spec(root_ + "/bad.tar"), Confined());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("bad.tar"), std::string::npos) << bad.status();
  // A FIFO named as a shard: refused without blocking.
  ASSERT_EQ(mkfifo((root_ + "/fifo.tar").c_str(), 0644), 0);
  EXPECT_EQ(OpenDataset(Spec(root_ + "/fifo.tar"), Confined()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A pattern leading out of the caller's folder.
  EXPECT_EQ(OpenDataset(Spec(root_, "../etc/{0..1}.tar"), Confined()).status().code(),
            absl::StatusCode::kPermissionDenied);
  // A label that is not one.
  testdata::TarWriter word;
  word.Add("s.jpg", "x").Add("s.cls", "cat");
  ASSERT_TRUE(testdata::WriteFile(root_ + "/word.tar", word.Close()).ok());
  auto worded = OpenDataset(Spec(root_ + "/word.tar"), Confined());
  EXPECT_EQ(worded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(worded.status().message().find("s.cls"), std::string::npos) << worded.status();
  // Too many members for the caps.
  SourceContext few = Confined();
  few.limits.max_files = 5;
  EXPECT_EQ(OpenDataset(Spec(root_, "train-{000000..000001}.tar"), few).status().code(),
            absl::StatusCode::kResourceExhausted);
  // A member over the per-file cap: that sample's error.
  SourceContext small = Confined();
  small.limits.max_file_bytes = 4;
  auto capped = OpenDataset(Spec(Shard(0)), small);
  ASSERT_TRUE(capped.ok()) << capped.status();
  std::string bytes;
  EXPECT_EQ(capped->source->Read(capped->samples[0].path, &bytes, nullptr).code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(WebDatasetTest, AShardRewrittenAfterIndexingIsThatSamplesDataLoss) {
  auto ds = OpenDataset(Spec(Shard(0)), Confined());
  ASSERT_TRUE(ds.ok()) << ds.status();
  // The same names, other sizes: the offsets indexed no longer hold.
  testdata::TarWriter t;
  t.Add("sample00.jpg", std::string(5000, 'z')).Add("sample00.cls", "0");
  ASSERT_TRUE(testdata::WriteFile(Shard(0) + ".new", t.Close()).ok());
  fs::rename(Shard(0) + ".new", Shard(0));
  std::string bytes;
  const absl::Status s = ds->source->Read(ds->samples[0].path, &bytes, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("changed since"), std::string::npos) << s;
}

}  // namespace
}  // namespace stoker
