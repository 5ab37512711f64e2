#include "server/sources/objects/s3_folder.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/dataset/dataset_growth.h"
#include "server/dataset/sample_source.h"
#include "server/objstore/moto_testing.h"
#include "server/sources/kept_testing.h"

namespace stoker {
namespace {


using moto_testing::Content;

class S3FolderTest : public moto_testing::BucketTest {
 protected:
  void SetUp() override {
    BucketTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    objects_ = {{"data/train/cat/1.jpg", Content(5000, 1)},
                {"data/train/cat/deep/2.PNG", Content(300, 2)},
                {"data/train/cat/notes.txt", "not an image"},
                {"data/train/dog/3.JPEG", Content(70000, 3)},
                {"data/train/dog/4.jpeg", Content(1, 4)},
                {"data/train/eel/5.png", Content(999, 5)},
                {"data/train/readme.md", "top-level file"},
                {"data/val/cat/6.jpg", Content(10, 6)}};
    for (const auto& [key, value] : objects_) ASSERT_TRUE(Put(key, value).ok()) << key;
  }


  absl::StatusOr<Dataset> Open(const std::string& url, ScanLimits limits = {}) {
    return OpenS3Folder(*S3Url::Parse(url), access_, client_.get(), limits);
  }

  std::map<std::string, std::string> objects_;
};

TEST_F(S3FolderTest, ListsAnImageFolderAndReadsItExactly) {
  absl::StatusOr<Dataset> ds = Open("s3://bkt/data/train");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->class_names, (std::vector<std::string>{"cat", "dog", "eel"}));
  EXPECT_EQ(ds->num_classes, 3u);
  // Its samples are objects: no shard's member to keep.
  absl::Status members = OpenS3Folder(*S3Url::Parse("s3://bkt/data/train"), access_,
                                      client_.get(), {}, {}, {}, {"txt"})
                             .status();
  EXPECT_EQ(members.code(), absl::StatusCode::kInvalidArgument) << members;
  // readme.md beside the classes, notes.txt in one (as a local folder).
  EXPECT_EQ(ds->skipped_files, 2u);
  std::vector<std::pair<std::string, int>> got;
  for (const Sample& s : ds->samples) got.emplace_back(s.path, s.label);
  EXPECT_EQ(got, (std::vector<std::pair<std::string, int>>{
                     {"s3://bkt/data/train/cat/1.jpg", 0},
                     {"s3://bkt/data/train/cat/deep/2.PNG", 0},
                     {"s3://bkt/data/train/dog/3.JPEG", 1},
                     {"s3://bkt/data/train/dog/4.jpeg", 1},
                     {"s3://bkt/data/train/eel/5.png", 2}}));
  // Identify makes no request. Until the session has read an object, its
  // key is not proven (no cached copy may be served); the read proves it.
  for (const Sample& s : ds->samples) {
    const std::string key = s.path.substr(std::string("s3://bkt/").size());
    const uint64_t before = client_->stats().requests;
    absl::StatusOr<SourceKey> id = ds->source->Identify(s.path);
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_FALSE(id->proven);
    EXPECT_EQ(client_->stats().requests, before);
    EXPECT_EQ(id->version.size, objects_[key].size());
    std::string bytes;
    FileVersion v;
    ASSERT_TRUE(ds->source->ReadIdentified(*id, s.path, &bytes, &v).ok()) << s.path;
    EXPECT_EQ(bytes, objects_[key]) << s.path;
    EXPECT_EQ(v, id->version);
    EXPECT_EQ(client_->stats().requests, before + 1) << s.path;  // The GET.
    absl::StatusOr<SourceKey> again = ds->source->Identify(s.path);
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(again->proven);
    EXPECT_EQ(again->key(), id->key());
    EXPECT_EQ(client_->stats().requests, before + 1) << "proven: no request";
    ASSERT_TRUE(ds->source->Read(s.path, &bytes, nullptr).ok());
    EXPECT_EQ(bytes, objects_[key]);
  }
  // Streamed, a folder of at most 16 images a class is all in window 0:
  // answered whole.
  ScanLimits streamed;
  streamed.streamed = true;
  absl::StatusOr<Dataset> whole = Open("s3://bkt/data/train", streamed);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->growth, nullptr);
  EXPECT_EQ(whole->samples.size(), ds->samples.size());
  EXPECT_EQ(whole->skipped_files, 2u);
  // Another session's source proves for itself.
  absl::StatusOr<Dataset> other = Open("s3://bkt/data/train/");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_FALSE(other->source->Identify(other->samples[0].path)->proven);
  EXPECT_EQ(other->source->Identify("s3://bkt/data/val/cat/6.jpg").status().code(),
            absl::StatusCode::kNotFound);
}

// `access` for the user `owner`.
ObjectStoreAccess As(ObjectStoreAccess access, int64_t owner) {
  access.owner = owner;
  return access;
}

// Its samples' paths, in order (published so far, for a streamed one).
std::vector<std::string> Paths(const Dataset& ds) {
  std::vector<std::string> out;
  for (uint64_t i = 0; i < ds.sample_count(); ++i) out.push_back(ds.sample(i).path);
  return out;
}

// s3://bkt/data/train/ as user `owner` of `access`, its listing kept in
// `kept` (`refresh`: listed again).
absl::StatusOr<Dataset> OpenKept(S3Client* client, const ObjectStoreAccess& access,
                                 int64_t owner, MemoryKept* kept, bool refresh = false) {
  return OpenS3Folder(*S3Url::Parse("s3://bkt/data/train/"), As(access, owner), client, {},
                      KeptListing{kept, refresh});
}

TEST_F(S3FolderTest, AKeptListingServesTheNextSessionAfterOneRequest) {
  MemoryKept kept;
  const uint64_t before = client_->stats().requests;
  absl::StatusOr<Dataset> first =  // Named without its last '/': the same prefix.
      OpenS3Folder(*S3Url::Parse("s3://bkt/data/train"), As(access_, 1000), client_.get(), {},
                   KeptListing{&kept, false});
  ASSERT_TRUE(first.ok()) << first.status();
  // The classes, and beside them the one page listed flat.
  EXPECT_EQ(client_->stats().requests, before + 2);
  ASSERT_EQ(kept.values.size(), 1u);
  EXPECT_EQ(kept.owners, std::vector<int64_t>{1000});
  // An object added since: the kept listing does not have it.
  ASSERT_TRUE(Put("data/train/cat/7.jpg", Content(40, 7)).ok());
  const uint64_t at_second = client_->stats().requests;
  absl::StatusOr<Dataset> second = OpenKept(client_.get(), access_, 1001, &kept);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(client_->stats().requests, at_second + 1);  // The proof alone.
  EXPECT_EQ(Paths(*second), Paths(*first));
  EXPECT_EQ(second->class_names, first->class_names);
  EXPECT_EQ(second->skipped_files, 2u);
  EXPECT_EQ(second->description, first->description);  // One content.
  EXPECT_FALSE(second->source->Identify(second->samples[0].path)->proven);
  std::string bytes;
  ASSERT_TRUE(second->source->Read(second->samples[0].path, &bytes, nullptr).ok());
  EXPECT_EQ(bytes, objects_["data/train/cat/1.jpg"]);
  // Listed again when asked: the new object, and the new listing kept.
  absl::StatusOr<Dataset> third = OpenKept(client_.get(), access_, 1002, &kept, true);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(third->samples.size(), first->samples.size() + 1);
  EXPECT_EQ(kept.owners, (std::vector<int64_t>{1000, 1002}));
  // Another principal (another access key id) lists for itself.
  ObjectStoreAccess other = access_;
  auto other_key = std::make_shared<S3Credentials>(*access_.credentials);
  other_key->access_key_id = "AKIAOTHER";
  other.credentials = other_key;
  const uint64_t at_other = client_->stats().requests;
  absl::StatusOr<Dataset> others = OpenKept(client_.get(), other, 2000, &kept);
  ASSERT_TRUE(others.ok()) << others.status();
  EXPECT_EQ(client_->stats().requests, at_other + 2);
  EXPECT_EQ(kept.values.size(), 2u);
  // An object of a kept listing changed since: DATA_LOSS, saying how to
  // list again.
  ASSERT_TRUE(Put("data/train/eel/5.png", "other bytes").ok());
  absl::StatusOr<Dataset> fifth = OpenKept(client_.get(), access_, 1000, &kept);
  ASSERT_TRUE(fifth.ok()) << fifth.status();
  absl::Status changed = fifth->source->Read("s3://bkt/data/train/eel/5.png", &bytes, nullptr);
  EXPECT_EQ(changed.code(), absl::StatusCode::kDataLoss) << changed;
  EXPECT_NE(changed.message().find("\"refresh\": true"), std::string::npos) << changed;
  ASSERT_TRUE(Put("data/train/eel/5.png", objects_["data/train/eel/5.png"]).ok());
  // A kept value that is not a listing of this prefix is listed again.
  for (auto& [key, value] : kept.values) value = "not a listing";
  absl::StatusOr<Dataset> fourth = OpenKept(client_.get(), access_, 1003, &kept);
  ASSERT_TRUE(fourth.ok()) << fourth.status();
  EXPECT_EQ(fourth->samples.size(), third->samples.size());
  EXPECT_EQ(kept.owners.back(), 1003);
  // Another endpoint's access proves nothing for this one.
  ObjectStoreAccess elsewhere = access_;
  elsewhere.endpoint.host = "localhost";
  EXPECT_EQ(OpenKept(client_.get(), elsewhere, 1004, &kept).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(S3FolderTest, AnObjectChangedSinceListingIsDataLoss) {
  absl::StatusOr<Dataset> ds = Open("s3://bkt/data/train");
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_TRUE(Put("data/train/dog/4.jpeg", "rewritten").ok());
  // Its read is DATA_LOSS naming it, never the new bytes; so it stays
  // unproven, and no cached copy of the listed version is served either.
  std::string bytes;
  absl::Status s = ds->source->Read("s3://bkt/data/train/dog/4.jpeg", &bytes, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("s3://bkt/data/train/dog/4.jpeg"), std::string::npos) << s;
  EXPECT_FALSE(ds->source->Identify("s3://bkt/data/train/dog/4.jpeg")->proven);
  // The others are untouched.
  ASSERT_TRUE(ds->source->Read("s3://bkt/data/train/dog/3.JPEG", &bytes, nullptr).ok());
  EXPECT_EQ(bytes, objects_["data/train/dog/3.JPEG"]);
  // A version is the same in every process (L2 outlives the daemon).
  absl::StatusOr<Dataset> again = Open("s3://bkt/data/train");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->source->Identify("s3://bkt/data/train/dog/3.JPEG")->key(),
            ds->source->Identify("s3://bkt/data/train/dog/3.JPEG")->key());
}

// Classes of 20, 3 and 18 images, with a note among the first's first 16
// keys: window 0 holds 16 + 3 + 16 of them, window 1 the other 4 + 2.
class S3FolderWindowsTest : public moto_testing::BucketTest {
 protected:
  void SetUp() override {
    BucketTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    for (const auto& [name, n] : std::vector<std::pair<std::string, int>>{
             {"a", 20}, {"b", 3}, {"c", 18}}) {
      for (int i = 0; i < n; ++i) {
        const std::string key = absl::StrFormat("w/%s/%02d.jpg", name, i);
        ASSERT_TRUE(Put(key, Content(100 + i, i)).ok());
        want_.push_back(absl::StrCat("s3://bkt/", key));
      }
    }
    ASSERT_TRUE(Put("w/a/05.txt", "a note").ok());
    // Window order: each class's first 16, then the rest.
    auto in = [&](int first, int count) {
      return std::vector<std::string>(want_.begin() + first, want_.begin() + first + count);
    };
    std::vector<std::string> order;
    for (const auto& part : {in(0, 16), in(20, 3), in(23, 16), in(16, 4), in(39, 2)}) {
      order.insert(order.end(), part.begin(), part.end());
    }
    want_ = order;
  }
  // By class unless `flat` (ScanLimits::flat_listing_objects), in pages of
  // `page_keys` (0: the store's).
  absl::StatusOr<Dataset> Open(bool streamed, KeptValues* kept = nullptr,
                               uint64_t max_files = ScanLimits().max_files,
                               uint64_t flat = 0, int page_keys = 0) {
    ScanLimits limits;
    limits.streamed = streamed;
    limits.max_files = max_files;
    limits.flat_listing_objects = flat;
    limits.flat_page_keys = page_keys;
    return OpenS3Folder(*S3Url::Parse("s3://bkt/w/"), access_, client_.get(), limits,
                        KeptListing{kept, false});
  }
  static DatasetGrowth::View End(const Dataset& ds) {
    DatasetGrowth::View v;
    for (size_t known = 0; !(v = ds.growth->Wait(known, absl::InfiniteDuration())).done;) {
      known = v.windows.size();
    }
    return v;
  }

  std::vector<std::string> want_;
};

TEST_F(S3FolderWindowsTest, ListedNowKeptOrStreamedTheSamplesAreNumberedInTheSameWindows) {
  MemoryKept kept;
  absl::StatusOr<Dataset> listed = Open(false, &kept);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->growth, nullptr);
  EXPECT_EQ(Paths(*listed), want_);
  EXPECT_EQ(listed->first_epoch_windows, (std::vector<uint64_t>{35, 6}));
  EXPECT_EQ(listed->skipped_files, 1u);
  for (uint64_t i = 0; i < listed->sample_count(); ++i) {
    const Sample& s = listed->sample(i);
    EXPECT_EQ(s.label, s.path[11] - 'a') << s.path;
  }
  // From the kept listing: the same.
  const uint64_t before = client_->stats().requests;
  absl::StatusOr<Dataset> taken = Open(true, &kept);
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(client_->stats().requests, before + 1);  // The proof.
  EXPECT_EQ(taken->growth, nullptr);  // All known: nothing to stream.
  EXPECT_EQ(Paths(*taken), want_);
  EXPECT_EQ(taken->first_epoch_windows, listed->first_epoch_windows);
  // Streamed: answered with window 0 or more, the classes known; the same
  // windows at the end, each sample readable.
  absl::StatusOr<Dataset> streamed = Open(true);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  ASSERT_NE(streamed->growth, nullptr);
  EXPECT_GE(streamed->sample_count(), 35u);
  EXPECT_EQ(streamed->num_classes, 3u);
  EXPECT_EQ(streamed->class_names, (std::vector<std::string>{"a", "b", "c"}));
  const DatasetGrowth::View v = End(*streamed);
  ASSERT_TRUE(v.status.ok()) << v.status;
  EXPECT_EQ(v.windows, listed->first_epoch_windows);
  EXPECT_EQ(v.num_classes, 3u);
  EXPECT_EQ(Paths(*streamed), want_);
  for (uint64_t i : {uint64_t{0}, uint64_t{40}}) {
    std::string bytes;
    const std::string& path = streamed->sample(i).path;
    ASSERT_TRUE(streamed->source->Read(path, &bytes, nullptr).ok()) << path;
    EXPECT_EQ(bytes.size(), 100u + std::stoi(path.substr(path.size() - 6, 2))) << path;
  }
}

TEST_F(S3FolderWindowsTest, AFlatListingNumbersTheSamplesAsTheListingByClass) {
  // Keys in order: a's 21 (the note among them), b's 3, c's 18; by class,
  // 3 prefixes and 42 objects are seen.
  struct Case {
    uint64_t flat;
    int page_keys;
    bool streamed;
    uint64_t requests;
    bool grows;
  };
  for (const Case& k : {
           // The classes, beside one page of the store's: all of it.
           Case{4000, 0, true, 2, false},
           // Pages of 16: a's first 16 say 48 in all; then a and b whole
           // in 32 keys say 96; both within 4000: a third page.
           Case{4000, 16, false, 4, false},
           // Pages of 30 hold a and b whole; 90 in all is more than 20: c
           // is listed by class, whole (one page of the store's) or
           // streamed (its first 16 keys, then the rest).
           Case{20, 30, false, 3, false},
           Case{20, 30, true, 4, true},
           // 48 in all is more than 1: the page taken for nothing, all by
           // class.
           Case{1, 16, false, 5, false},
       }) {
    SCOPED_TRACE(absl::StrCat(k.flat, " objects flat, pages of ", k.page_keys,
                              k.streamed ? ", streamed" : ""));
    const uint64_t before = client_->stats().requests;
    absl::StatusOr<Dataset> ds = Open(k.streamed, nullptr, ScanLimits().max_files, k.flat,
                                      k.page_keys);
    ASSERT_TRUE(ds.ok()) << ds.status();
    std::vector<uint64_t> windows = ds->first_epoch_windows;
    EXPECT_EQ(ds->growth != nullptr, k.grows);
    if (ds->growth != nullptr) {
      const DatasetGrowth::View v = End(*ds);
      ASSERT_TRUE(v.status.ok()) << v.status;
      windows = v.windows;
    }
    EXPECT_EQ(client_->stats().requests, before + k.requests);
    EXPECT_EQ(Paths(*ds), want_);
    EXPECT_EQ(windows, (std::vector<uint64_t>{35, 6}));
    EXPECT_EQ(ds->skipped_files, 1u);
    EXPECT_EQ(ds->class_names, (std::vector<std::string>{"a", "b", "c"}));
    // The same count against max_files as by class.
    EXPECT_EQ(Open(false, nullptr, 44, k.flat, k.page_keys).status().code(),
              absl::StatusCode::kResourceExhausted);
    EXPECT_TRUE(Open(false, nullptr, 45, k.flat, k.page_keys).ok());
  }
  EXPECT_EQ(Open(false, nullptr, 44).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(Open(false, nullptr, 45).ok());
  // Streamed, the classes taken flat are counted whole before it answers
  // (by class, the first keys: it answers, and its growth ends with the
  // error).
  EXPECT_EQ(Open(true, nullptr, 44, 4000).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(S3FolderWindowsTest, AStreamedListingsLaterErrorEndsItsGrowthAfterTheFirstWindow) {
  // Seen by window 0's end: 3 prefixes, then pages of 16 + 5, 3 and 16
  // keys (43); the last class's second page passes 44.
  absl::StatusOr<Dataset> ds = Open(true, nullptr, 44);
  ASSERT_TRUE(ds.ok()) << ds.status();
  const DatasetGrowth::View v = End(*ds);
  EXPECT_EQ(v.status.code(), absl::StatusCode::kResourceExhausted) << v.status;
  EXPECT_EQ(v.windows, (std::vector<uint64_t>{35}));
  // Not streamed: refused at the opening.
  EXPECT_EQ(Open(false, nullptr, 44).status().code(), absl::StatusCode::kResourceExhausted);
  // A streamed dataset dropped while its listing goes on: the listing
  // stops with it (its thread joined).
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Dataset> dropped = Open(true);
    ASSERT_TRUE(dropped.ok()) << dropped.status();
    EXPECT_GE(dropped->sample_count(), 35u);
  }
}

// Keys that try where a flat listing's classes begin and end: a key equal
// to the root, an empty class name, objects directly in the root among the
// classes ("a.txt" sorts between "a-b/" and "a/") and a shard there, a
// folder marker, nested folders, a class of no image.
class S3FolderFlatTest : public moto_testing::BucketTest {
 protected:
  void SetUp() override {
    BucketTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    int i = 0;
    for (const char* key :
         {"f/", "f//e.jpg", "f/a-b/1.jpg", "f/a-b/2.JPEG", "f/a.txt", "f/a/", "f/a/1.jpg",
          "f/a/deep/2.png", "f/a/notes.txt", "f/a/3.jpg", "f/c/x.txt", "f/d/1.png", "f/d/2.png",
          "f/d/3.png", "f/d/4.png", "f/d/5.png", "f/readme.md", "f/z.tar"}) {
      ASSERT_TRUE(Put(key, Content(50 + i, i)).ok()) << key;
      ++i;
    }
  }
  absl::StatusOr<Dataset> Open(uint64_t flat, int page_keys,
                               uint64_t max_files = ScanLimits().max_files) {
    ScanLimits limits;
    limits.flat_listing_objects = flat;
    limits.flat_page_keys = page_keys;
    limits.max_files = max_files;
    return OpenS3Folder(*S3Url::Parse("s3://bkt/f/"), access_, client_.get(), limits);
  }
};

TEST_F(S3FolderFlatTest, ListedFlatInAnyPagesOrByClassTheDatasetIsTheSame) {
  absl::StatusOr<Dataset> want = Open(0, 0);
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(want->class_names, (std::vector<std::string>{"", "a-b", "a", "c", "d"}));
  EXPECT_EQ(want->samples.size(), 11u);
  EXPECT_EQ(want->skipped_files, 7u);  // 4 in the root, a's marker and note, c's.
  // The fewest objects seen that list it by class.
  uint64_t least = 1;
  while (least < 64 && !Open(0, 0, least).ok()) ++least;
  EXPECT_EQ(least, 23u);  // 5 prefixes, 4 objects in the root, 14 in classes.
  for (uint64_t flat : {1, 10, 40, 4000}) {
    for (int page_keys : {1, 2, 3, 5, 7, 0}) {
      SCOPED_TRACE(absl::StrCat(flat, " objects flat, pages of ", page_keys));
      const uint64_t before = client_->stats().requests;
      absl::StatusOr<Dataset> ds = Open(flat, page_keys);
      ASSERT_TRUE(ds.ok()) << ds.status();
      if (page_keys == 0) {  // All of it in one page, beside the classes.
        EXPECT_EQ(client_->stats().requests, before + 2);
      }
      EXPECT_EQ(ds->class_names, want->class_names);
      ASSERT_EQ(ds->samples.size(), want->samples.size());
      for (size_t i = 0; i < ds->samples.size(); ++i) {
        EXPECT_EQ(ds->samples[i].path, want->samples[i].path);
        EXPECT_EQ(ds->samples[i].label, want->samples[i].label) << ds->samples[i].path;
      }
      EXPECT_EQ(ds->first_epoch_windows, want->first_epoch_windows);
      EXPECT_EQ(ds->skipped_files, want->skipped_files);
      EXPECT_EQ(Open(flat, page_keys, least - 1).status().code(),
                absl::StatusCode::kResourceExhausted);
      EXPECT_TRUE(Open(flat, page_keys, least).ok());
    }
  }
}

TEST_F(S3FolderTest, RefusalsNameTheCause) {
  EXPECT_EQ(Open("s3://bkt/nothing/").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Open("s3://bkt/data/train/dog").status().code(),
            absl::StatusCode::kFailedPrecondition);  // Images, no classes.
  ScanLimits few;
  few.max_files = 3;
  absl::Status s = Open("s3://bkt/data/train", few).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("--max-dataset-files"), std::string::npos) << s;
  std::atomic<bool> cancel{true};
  ScanLimits cancelled;
  cancelled.cancel = &cancel;
  EXPECT_EQ(Open("s3://bkt/data/train", cancelled).status().code(),
            absl::StatusCode::kCancelled);
  ScanLimits small;
  small.max_file_bytes = 1000;
  absl::StatusOr<Dataset> ds = Open("s3://bkt/data/train", small);
  ASSERT_TRUE(ds.ok()) << ds.status();
  std::string bytes;
  EXPECT_EQ(ds->source->Read("s3://bkt/data/train/dog/3.JPEG", &bytes, nullptr).code(),
            absl::StatusCode::kResourceExhausted);
  // An endpoint the operator did not list.
  access_.endpoint.host = "localhost";
  s = Open("s3://bkt/data/train").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
}

}  // namespace
}  // namespace stoker
