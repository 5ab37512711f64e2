// WebDataset shards in a real S3 API server (moto): samples, labels and
// masks as the local kind gives them, bytes exact, read ahead once, kept
// indexes, and shards that lie or change.
#include "server/sources/objects/s3_shards.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "proto/kept.pb.h"
#include "server/dataset/dataset_growth.h"
#include "server/dataset/sample_source.h"
#include "server/objstore/fault_proxy.h"
#include "server/objstore/moto_testing.h"
#include "server/sources/kept_testing.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

using moto_testing::Content;

// What was read ahead, by the key it was kept under.
struct AheadLog {
  absl::Mutex mu;
  std::map<std::string, std::string> kept;  // SourceKey::key() -> bytes.
  stoker::ReadAhead Fn(uint64_t most_bytes = uint64_t{1} << 30) {
    return {[this](const SourceKey& id, std::string bytes) {
              absl::MutexLock lock(&mu);
              kept[id.key()] = std::move(bytes);
            },
            most_bytes};
  }
};

class S3ShardsTest : public moto_testing::BucketTest {
 protected:
  void SetUp() override {
    BucketTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // Three shards of 3 samples: an image (its suffix in upper case), a
    // label, a json and a mask; the middle shard's pictures large enough
    // that the shard takes several blocks to read, members across them.
    for (int s = 0; s < 3; ++s) {
      testdata::TarWriter t;
      for (int i = 0; i < 3; ++i) {
        const int n = 3 * s + i;
        const std::string key = absl::StrFormat("sample%02d", n);
        const std::string image = Content(s == 1 ? (3 << 20) + 4097 * i : 1000 + n, n);
        images_.push_back(image);
        masks_.push_back(absl::StrCat("mask-", n));
        t.Add(key + ".JPG", image)
            .Add(key + ".cls", absl::StrCat(n % 4, "\n"))
            .Add(key + ".json", "{}")
            .Add(key + ".seg.png", masks_.back());
      }
      t.Add("__meta__", "skipped");
      ASSERT_TRUE(Put(Shard(s), t.Close()).ok());
    }
    ASSERT_TRUE(Put("shards/notes.txt", "not a shard").ok());
  }

  static std::string Shard(int s) { return absl::StrFormat("shards/train-%06d.tar", s); }
  absl::StatusOr<Dataset> Open(const std::string& url, const std::string& pattern,
                               KeptValues* kept = nullptr, const ReadAhead& ahead = {},
                               bool streamed = false,
                               const std::vector<std::string>& members = {}) {
    ScanLimits limits;
    limits.streamed = streamed;
    return OpenS3Shards(*S3Url::Parse(url), {pattern, nullptr, "", members}, access_,
                        client_.get(), limits, KeptListing{kept, false}, ahead);
  }
  // A streamed opening's end.
  static DatasetGrowth::View End(const Dataset& ds) {
    DatasetGrowth::View v;
    for (size_t known = 0; !(v = ds.growth->Wait(known, absl::InfiniteDuration())).done;) {
      known = v.windows.size();
    }
    return v;
  }
  uint64_t Requests() const { return client_->stats().requests; }

  std::vector<std::string> images_, masks_;
};

TEST_F(S3ShardsTest, SamplesByPatternPrefixOrOneShardReadExactly) {
  for (const auto& [url, pattern, first, count] :
       std::vector<std::tuple<std::string, std::string, int, int>>{
           {"s3://bkt/shards", "train-{000000..000002}.tar", 0, 9},
           {"s3://bkt/shards/", "", 0, 9},
           {"s3://bkt/shards/train-000002.tar", "", 6, 3}}) {
    AheadLog ahead;
    absl::StatusOr<Dataset> ds = Open(url, pattern, nullptr, ahead.Fn());
    ASSERT_TRUE(ds.ok()) << url << ": " << ds.status();
    ASSERT_EQ(ds->samples.size(), static_cast<size_t>(count)) << url;
    EXPECT_EQ(ds->files_per_sample, 2u);
    EXPECT_EQ(ds->skipped_files, static_cast<uint64_t>(count / 3)) << "__meta__";
    EXPECT_TRUE(ds->source->remote());
    for (int i = 0; i < count; ++i) {
      const Sample& s = ds->samples[i];
      const int n = first + i;
      EXPECT_EQ(s.label, n % 4) << s.path;
      ASSERT_EQ(s.more.size(), 1u);
      for (const auto& [path, want] : {std::pair{s.path, images_[n]}, {s.more[0], masks_[n]}}) {
        // Indexing read the shard as this session: its members are proven,
        // and what streamed by was kept under the key a read is cached at.
        absl::StatusOr<SourceKey> id = ds->source->Identify(path);
        ASSERT_TRUE(id.ok()) << id.status();
        EXPECT_TRUE(id->proven) << path;
        EXPECT_EQ(ahead.kept[id->key()], want) << path;
        const uint64_t before = Requests();
        std::string bytes;
        FileVersion v;
        ASSERT_TRUE(ds->source->Read(path, &bytes, &v).ok()) << path;
        EXPECT_EQ(bytes, want) << path;
        EXPECT_EQ(v, id->version);
        EXPECT_EQ(Requests(), before + 1) << "one ranged GET";
      }
    }
    // Every image and mask was kept ahead; nothing else.
    EXPECT_EQ(ahead.kept.size(), 2u * count) << url;
  }
  EXPECT_EQ(Open("s3://bkt/shards", "train-{000000..000003}.tar").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(Open("s3://bkt/nothing/", "").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(S3ShardsTest, AKeptIndexIsTakenWithoutReadingTheShard) {
  MemoryKept kept;
  absl::StatusOr<Dataset> first = Open("s3://bkt/shards/", "", &kept);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(kept.values.size(), 3u);
  const uint64_t before = Requests();
  absl::StatusOr<Dataset> again = Open("s3://bkt/shards/", "", &kept);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Requests(), before + 1) << "the listing, no shard read";
  ASSERT_EQ(again->samples.size(), first->samples.size());
  for (size_t i = 0; i < again->samples.size(); ++i) {
    EXPECT_EQ(again->samples[i].path, first->samples[i].path);
    EXPECT_EQ(again->samples[i].label, first->samples[i].label);
  }
  // Each shard proven by this session before a member of it is
  // identified: one HEAD, once.
  for (int i : {4, 5, 3, 0}) {
    const uint64_t at = Requests();
    absl::StatusOr<SourceKey> id = again->source->Identify(again->samples[i].path);
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_TRUE(id->proven);
    EXPECT_EQ(Requests(), at + (i == 4 || i == 0 ? 1 : 0)) << i;
  }
  std::string bytes;
  ASSERT_TRUE(again->source->Read(again->samples[4].path, &bytes, nullptr).ok());
  EXPECT_EQ(bytes, images_[4]);
  // Another principal's key id does not take this one's index.
  auto other = std::make_shared<S3Credentials>(*access_.credentials);
  other->access_key_id = "AKIAOTHERPRINCIPAL";
  access_.credentials = other;
  ASSERT_TRUE(Open("s3://bkt/shards/", "", &kept).ok());
  EXPECT_EQ(kept.values.size(), 6u);
  // A kept index that is not one, or one whose members lie outside their
  // shard, is not taken: the shard is read again, and its index kept anew.
  int k = 0;
  for (auto& [key, value] : kept.values) {
    kept::ShardIndex bad;
    kept::ShardIndex::Sample* s = bad.add_samples();
    s->set_image_offset(uint64_t{1} << 40);
    s->set_image_size(10);
    value = k++ % 2 == 0 ? "not an index" : bad.SerializeAsString();
  }
  const uint64_t listed = Requests();
  absl::StatusOr<Dataset> read = Open("s3://bkt/shards/", "", &kept);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->samples.size(), 9u);
  EXPECT_GE(Requests(), listed + 1 + 3) << "the listing and each shard read";
  int anew = 0;  // This principal's three (the first one's stay as they were).
  for (const auto& [key, value] : kept.values) {
    kept::ShardIndex index;
    anew += index.ParseFromString(value) && index.samples_size() == 3;
  }
  EXPECT_EQ(anew, 3);
  // Asked to list again: no kept index is taken either.
  const uint64_t at = Requests();
  ASSERT_TRUE(OpenS3Shards(*S3Url::Parse("s3://bkt/shards/"), {}, access_, client_.get(),
                           ScanLimits{}, KeptListing{&kept, true}, {})
                  .ok());
  EXPECT_GE(Requests(), at + 1 + 3);
}

TEST_F(S3ShardsTest, OpeningCountsWhatItListsAndReadsForItsCaller) {
  MemoryKept kept;
  OpeningProgress progress;
  ScanLimits limits;
  limits.progress = &progress;
  absl::StatusOr<Dataset> ds = OpenS3Shards(*S3Url::Parse("s3://bkt/shards/"), {}, access_,
                                            client_.get(), limits, KeptListing{&kept, false}, {});
  ASSERT_TRUE(ds.ok()) << ds.status();
  OpeningProgress::View v = progress.Now();
  EXPECT_EQ(v.listed, 4u);  // Three shards and the notes.
  EXPECT_EQ(v.shards, 3u);
  EXPECT_EQ(v.shards_done, 3u);
  uint64_t sizes = 0;
  for (int s = 0; s < 3; ++s) {
    absl::StatusOr<ObjectVersion> head =
        client_->Head(access_.endpoint, S3Url{"bkt", Shard(s)}, access_.credentials);
    ASSERT_TRUE(head.ok()) << head.status();
    sizes += head->size;
  }
  EXPECT_EQ(v.bytes, sizes);
  // What was read: all of it but blocks only members no sample takes span.
  EXPECT_EQ(v.bytes_read, ds->read_ahead_bytes);
  EXPECT_LE(v.bytes_read, v.bytes);
  EXPECT_GT(v.bytes_read, uint64_t{4} << 20);
  // Kept indexes: nothing left to read, so nothing counted to read.
  OpeningProgress again;
  limits.progress = &again;
  ASSERT_TRUE(OpenS3Shards(*S3Url::Parse("s3://bkt/shards/"), {}, access_, client_.get(), limits,
                           KeptListing{&kept, false}, {})
                  .ok());
  v = again.Now();
  EXPECT_EQ(v.shards_done, 3u);
  EXPECT_EQ(v.bytes, 0u);
  EXPECT_EQ(v.bytes_read, 0u);
}

TEST_F(S3ShardsTest, ReadAheadStopsAtItsBudgetAndOneShardIsOneHead) {
  // One shard: its HEAD, then its one block; its small pictures and masks
  // fit the budget. Then all three shards with room for 4 MiB: not every
  // picture is kept ahead (the middle shard's are 3 MiB each), labels are
  // read anyway.
  AheadLog ahead;
  const uint64_t before = Requests();
  absl::StatusOr<Dataset> ds =
      Open("s3://bkt/shards/train-000000.tar", "", nullptr, ahead.Fn(6 * 1024));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(Requests(), before + 2) << "a HEAD, then the shard's one block";
  EXPECT_EQ(ahead.kept.size(), 6u);  // 3 pictures and 3 masks.
  EXPECT_EQ(ds->samples[2].label, 2);
  AheadLog none;
  ds = Open("s3://bkt/shards/", "", nullptr, none.Fn(4 << 20));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->samples.size(), 9u);
  EXPECT_LE(none.kept.size(), 2u * 9 - 1) << "not every picture fits";
  uint64_t kept_bytes = 0;
  for (const auto& [key, value] : none.kept) kept_bytes += value.size();
  EXPECT_LE(kept_bytes, uint64_t{4} << 20);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(ds->samples[i].label, i % 4);
  // Of a sample's pictures, the first is its image and the only one kept
  // ahead; a picture over the file cap is left to the session's read.
  ASSERT_TRUE(Put("other/two.tar", testdata::TarWriter()
                                       .Add("a.jpg", "first")
                                       .Add("a.png", "second")
                                       .Add("b.jpg", std::string(5000, 'b'))
                                       .Close())
                  .ok());
  AheadLog two;
  ScanLimits capped;
  capped.max_file_bytes = 4096;
  ds = OpenS3Shards(*S3Url::Parse("s3://bkt/other/two.tar"), {}, access_, client_.get(), capped,
                    KeptListing{}, two.Fn());
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->samples.size(), 2u);
  ASSERT_EQ(two.kept.size(), 1u);
  EXPECT_EQ(two.kept.begin()->second, "first");
  EXPECT_EQ(two.kept.begin()->first, ds->source->Identify(ds->samples[0].path)->key());
}

TEST_F(S3ShardsTest, AShardThatLiesOrChangesIsDataLossNamingIt) {
  absl::StatusOr<Dataset> ds = Open("s3://bkt/shards/", "");
  ASSERT_TRUE(ds.ok()) << ds.status();
  // Rewritten after indexing: its members are not read at old offsets.
  ASSERT_TRUE(Put(Shard(0), testdata::TarWriter().Add("a.jpg", "new").Close()).ok());
  std::string bytes;
  absl::Status s = ds->source->Read(ds->samples[0].path, &bytes, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("open the dataset again"), std::string::npos) << s;
  // A header whose size runs past the shard's end.
  testdata::TarWriter liar;
  liar.Add("a.jpg", std::string(600, 'j'));
  std::string& b = liar.bytes();
  std::snprintf(&b[124], 12, "%011o", 1u << 30);
  liar.Reseal(0);
  ASSERT_TRUE(Put(Shard(1), liar.Close()).ok());
  absl::Status lie = Open("s3://bkt/shards/", "").status();
  EXPECT_EQ(lie.code(), absl::StatusCode::kDataLoss) << lie;
  EXPECT_NE(lie.message().find("s3://bkt/shards/train-000001.tar"), std::string::npos) << lie;
  // A label that is not one.
  ASSERT_TRUE(Put(Shard(1), testdata::TarWriter()
                                .Add("k.jpg", "image")
                                .Add("k.cls", "minus one")
                                .Close())
                  .ok());
  absl::Status label = Open("s3://bkt/shards/", "").status();
  EXPECT_EQ(label.code(), absl::StatusCode::kDataLoss) << label;
  EXPECT_NE(label.message().find("k.cls"), std::string::npos) << label;
}

TEST_F(S3ShardsTest, AStreamedOpeningAnswersEarlyWithTheSameSamples) {
  const std::vector<std::string> members = {"json", "txt"};  // Every sample's; none's.
  absl::StatusOr<Dataset> whole = Open("s3://bkt/shards/", "", nullptr, {}, false, members);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->growth, nullptr);
  EXPECT_EQ(whole->first_epoch_windows, (std::vector<uint64_t>{3, 6}));  // Shard 0; 1 and 2.
  AheadLog ahead;
  absl::StatusOr<Dataset> ds = Open("s3://bkt/shards/", "", nullptr, ahead.Fn(), true, members);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_NE(ds->growth, nullptr);
  EXPECT_TRUE(ds->samples.empty());
  EXPECT_GE(ds->sample_count(), 3u);  // At least the first window.
  // The first window's samples have masks; then the members kept.
  EXPECT_EQ(ds->member_files, (std::vector<std::string>{"", "seg.png", "json", "txt"}));
  EXPECT_EQ(ds->member_files, whole->member_files);
  EXPECT_EQ(ds->files_per_sample, 4u);
  const DatasetGrowth::View v = End(*ds);
  ASSERT_TRUE(v.status.ok()) << v.status;
  EXPECT_EQ(v.windows, whole->first_epoch_windows);
  EXPECT_EQ(v.num_classes, whole->num_classes);
  ASSERT_EQ(ds->sample_count(), whole->samples.size());
  for (uint64_t i = 0; i < ds->sample_count(); ++i) {
    const Sample& s = ds->sample(i);
    EXPECT_EQ(s.path, whole->samples[i].path);
    EXPECT_EQ(s.label, whole->samples[i].label);
    EXPECT_EQ(s.more, whole->samples[i].more);
    std::string bytes;
    ASSERT_TRUE(ds->source->Read(s.path, &bytes, nullptr).ok()) << s.path;
    EXPECT_EQ(bytes, images_[i]);
  }
  // The whole opening's reads, for the session's first epoch: each shard read once.
  EXPECT_EQ(ds->growth->reads().first, 1 + 1 + 2) << "the middle shard takes two blocks";
  EXPECT_EQ(ahead.kept.size(), 3u * 9) << "each picture, mask and json";
  // A member name that is not one of the dataset's shards' is refused.
  for (const std::string& bad :
       {std::string("s3://bkt/shards/train-000009.tar#0+10"), std::string("s3://bkt/x"),
        absl::StrCat("s3://bkt/", Shard(0), "#0+99999999"),
        absl::StrCat("s3://bkt/", Shard(0), "#0+10."),
        absl::StrCat("s3://bkt/", Shard(0), "#0++10"),
        absl::StrCat("s3://bkt/", Shard(0), "#0+ 10"),
        absl::StrCat("s3://bkt/", Shard(0), "#0+1x.txt"), std::string()}) {
    std::string bytes;
    EXPECT_EQ(ds->source->Read(bad, &bytes, nullptr).code(), absl::StatusCode::kNotFound) << bad;
  }
}

// The members a session keeps (S3Source.members) are each sample's
// further files, as the local kind keeps them: a member's bytes, an empty
// one as data, an absent one as 0 bytes; read ahead as they stream by (a
// skipped sample's give their room back); and kept in the shard's index,
// under the members it keeps.
TEST_F(S3ShardsTest, KeptMembersAreEachSamplesFilesReadAheadAndKeptByName) {
  testdata::TarWriter t;
  t.Add("0.txt", std::string(100, 'x'));  // No picture: skipped.
  t.Add("a.jpg", "picture a").Add("a.txt", "a cat on a mat").Add("a.json", R"({"w": 1})");
  t.Add("b.jpg", "picture b").Add("b.txt", "");
  t.Add("c.jpg", "picture c").Add("c.json", "{}").Add("c.txt", "a dog");
  ASSERT_TRUE(Put("caps/0.tar", t.Close()).ok());
  const std::vector<std::vector<std::string>> want = {
      {"picture a", "a cat on a mat", R"({"w": 1})"},
      {"picture b", "", ""},
      {"picture c", "a dog", "{}"}};
  // Each sample's files' bytes; each read ahead (`ahead`) where it is not empty.
  auto files = [](const Dataset& ds, AheadLog* ahead) {
    std::vector<std::vector<std::string>> out;
    for (const Sample& s : ds.samples) {
      std::vector<std::string> paths = {s.path};
      paths.insert(paths.end(), s.more.begin(), s.more.end());
      out.emplace_back();
      for (const std::string& path : paths) {
        std::string bytes;
        EXPECT_TRUE(ds.source->Read(path, &bytes, nullptr).ok()) << path;
        EXPECT_EQ(ds.source->EmptyIsData(path), path != s.path) << path;
        absl::StatusOr<SourceKey> id = ds.source->Identify(path);
        EXPECT_TRUE(id.ok()) << path;
        if (ahead != nullptr && !bytes.empty() && id.ok()) {
          EXPECT_EQ(ahead->kept[id->key()], bytes) << path;
        }
        out.back().push_back(bytes);
      }
    }
    return out;
  };
  MemoryKept kept;
  AheadLog ahead;
  // Room for the skipped caption, then for every picture and member.
  absl::StatusOr<Dataset> ds = Open("s3://bkt/caps/", "", &kept, ahead.Fn(106), false,
                                    {"txt", "json"});
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->member_files, (std::vector<std::string>{"", "txt", "json"}));
  EXPECT_EQ(ds->files_per_sample, 3u);
  EXPECT_EQ(ds->samples[0].more[0], absl::StrCat("s3://bkt/caps/0.tar#2560+14.txt"));
  EXPECT_EQ(ds->skipped_files, 1u);
  EXPECT_EQ(files(*ds, &ahead), want);
  EXPECT_EQ(ahead.kept.size(), 3u + 4u) << "the pictures and the members not empty";
  // Kept: the same members are taken without reading the shard; others
  // read it again.
  uint64_t before = Requests();
  absl::StatusOr<Dataset> again = Open("s3://bkt/caps/", "", &kept, {}, false,
                                       {"txt", "json"});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Requests(), before + 1) << "the listing, no shard read";
  EXPECT_EQ(files(*again, nullptr), want);
  before = Requests();
  absl::StatusOr<Dataset> captions = Open("s3://bkt/caps/", "", &kept, {}, false, {"txt"});
  ASSERT_TRUE(captions.ok()) << captions.status();
  EXPECT_EQ(Requests(), before + 2) << "the listing and the shard";
  EXPECT_EQ(kept.values.size(), 2u);
  EXPECT_EQ(files(*captions, nullptr),
            (std::vector<std::vector<std::string>>{
                {"picture a", "a cat on a mat"}, {"picture b", ""}, {"picture c", "a dog"}}));
}

// --max-dataset-files counts the shards' tar members, as the local kind
// does: 3 shards of 13 (3 samples of 4 members, and __meta__), whether an
// opening reads them or takes their kept indexes.
TEST_F(S3ShardsTest, MaxDatasetFilesCountsTarMembersReadOrKept) {
  MemoryKept kept;
  for (const bool from_kept : {false, true}) {
    for (const uint64_t max_files : {uint64_t{39}, uint64_t{38}}) {
      ScanLimits limits;
      limits.max_files = max_files;
      MemoryKept none;
      absl::StatusOr<Dataset> ds =
          OpenS3Shards(*S3Url::Parse("s3://bkt/shards/"), {}, access_, client_.get(), limits,
                       KeptListing{from_kept ? &kept : &none, false}, {});
      if (max_files == 39) {
        ASSERT_TRUE(ds.ok()) << from_kept << ": " << ds.status();
        EXPECT_EQ(ds->samples.size(), 9u);
        if (!from_kept) {
          ASSERT_TRUE(OpenS3Shards(*S3Url::Parse("s3://bkt/shards/"), {}, access_,
                                   client_.get(), limits, KeptListing{&kept, false}, {})
                          .ok());
        }
      } else {
        EXPECT_EQ(ds.status().code(), absl::StatusCode::kResourceExhausted) << from_kept;
        EXPECT_NE(ds.status().message().find("over 38 members in all"), std::string::npos)
            << ds.status();
      }
    }
  }
  EXPECT_EQ(kept.values.size(), 3u);
}

TEST_F(S3ShardsTest, AStreamedPatternsFirstShardIsAskedForBesideTheListing) {
  // Its first block is asked for beside the listing and taken: the same
  // samples and requests (1 listing, a GET per block) as without.
  const uint64_t before = Requests();
  AheadLog ahead;
  absl::StatusOr<Dataset> ds =
      Open("s3://bkt/shards", "train-{000000..000002}.tar", nullptr, ahead.Fn(), true);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_NE(ds->growth, nullptr);
  const DatasetGrowth::View v = End(*ds);
  ASSERT_TRUE(v.status.ok()) << v.status;
  EXPECT_EQ(Requests(), before + 1 + 1 + 2 + 1);  // No block read twice.
  EXPECT_EQ(ds->growth->reads().first, 1 + 1 + 2);
  ASSERT_EQ(ds->sample_count(), 9u);
  for (uint64_t i = 0; i < ds->sample_count(); ++i) {
    std::string bytes;
    ASSERT_TRUE(ds->source->Read(ds->sample(i).path, &bytes, nullptr).ok());
    EXPECT_EQ(bytes, images_[i]);
  }
  // A first name the store lacks: the listing's NOT_FOUND, the GET's 404
  // set aside.
  absl::StatusOr<Dataset> none =
      Open("s3://bkt/shards", "train-{000007..000008}.tar", nullptr, {}, true);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound) << none.status();
  EXPECT_NE(none.status().message().find("train-000007.tar"), std::string::npos);
}

TEST_F(S3ShardsTest, AStreamedOpeningsLaterErrorEndsItsGrowth) {
  // The second window's shard lies: the first window is served, then the
  // growth ends with the error naming the shard.
  testdata::TarWriter liar;
  liar.Add("a.jpg", std::string(600, 'j'));
  std::snprintf(&liar.bytes()[124], 12, "%011o", 1u << 30);
  liar.Reseal(0);
  ASSERT_TRUE(Put(Shard(2), liar.Close()).ok());
  absl::StatusOr<Dataset> ds = Open("s3://bkt/shards/", "", nullptr, {}, true);
  ASSERT_TRUE(ds.ok()) << ds.status();
  const DatasetGrowth::View v = End(*ds);
  EXPECT_EQ(v.status.code(), absl::StatusCode::kDataLoss) << v.status;
  EXPECT_NE(v.status.message().find("s3://bkt/shards/train-000002.tar"), std::string::npos)
      << v.status;
  EXPECT_EQ(v.windows, (std::vector<uint64_t>{3}));
  EXPECT_EQ(ds->sample_count(), 3u);
  // The first shard lies: refused at once, as without streaming.
  ASSERT_TRUE(Put(Shard(0), liar.Close()).ok());
  EXPECT_EQ(Open("s3://bkt/shards/", "", nullptr, {}, true).status().code(),
            absl::StatusCode::kDataLoss);
  // One window (one shard) is never streamed.
  absl::StatusOr<Dataset> one = Open("s3://bkt/shards/train-000001.tar", "", nullptr, {}, true);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->growth, nullptr);
  EXPECT_EQ(one->samples.size(), 3u);
}

TEST_F(S3ShardsTest, TheScanTimeoutBoundsAStallNotTheWholeIndexing) {
  // Through a proxy adding 500 ms per request: the middle shard takes two
  // GETs one after the other, so indexing takes over 1 s while no wait
  // for a block passes about 550 ms.
  auto at = [&](absl::Duration latency, absl::Duration timeout) {
    FaultProxy::Options po;
    po.upstream_port = moto_->port();
    po.latency = latency;
    std::unique_ptr<FaultProxy> proxy = *FaultProxy::Start(po);
    S3Client::Options o;
    o.endpoints = *EndpointAllowList::Parse(proxy->url());
    std::unique_ptr<S3Client> client = *S3Client::Create(o);
    ObjectStoreAccess via = access_;
    via.endpoint = *Endpoint::Parse(proxy->url());
    ScanLimits limits;
    limits.max_time = timeout;
    return OpenS3Shards(*S3Url::Parse("s3://bkt/shards/"), {""}, via, client.get(), limits,
                        KeptListing{nullptr, false}, {});
  };
  absl::StatusOr<Dataset> ds = at(absl::Milliseconds(500), absl::Milliseconds(900));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->samples.size(), 9u);
  // A store that answers nothing for longer ends it (here its listing's
  // page in flight), naming the flag.
  ds = at(absl::Milliseconds(2000), absl::Milliseconds(900));
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kDeadlineExceeded) << ds.status();
  EXPECT_NE(ds.status().message().find("900ms (--dataset-scan-timeout)"), std::string::npos)
      << ds.status();
}

TEST_F(S3ShardsTest, TheKindTakesAPatternEndingTheUrl) {
  SourceContext ctx;
  ctx.objects = client_.get();
  auto access = std::make_shared<ObjectStoreAccess>(access_);
  ctx.access = access;
  v1::DatasetSpec spec;
  spec.mutable_s3()->set_url("s3://bkt/shards/train-{000001..000002}.tar");
  absl::StatusOr<Dataset> ds = OpenDataset(spec, ctx);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->samples.size(), 6u);
  EXPECT_EQ(ds->samples[0].label, 3);
  spec.mutable_s3()->set_url("s3://bkt/shards/");
  ds = OpenDataset(spec, ctx);  // A prefix of shards, without classes.
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->samples.size(), 9u);
}

}  // namespace
}  // namespace stoker
