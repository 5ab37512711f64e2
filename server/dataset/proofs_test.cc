#include "server/dataset/proofs.h"

#include <stdio.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/access/fault_injecting_file_system.h"
#include "server/dataset/sample_source.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

FileVersion Version(uint64_t inode, uint64_t size) {
  FileVersion v;
  v.device = 7;
  v.inode = inode;
  v.size = size;
  v.mtime_ns = 11;
  v.ctime_ns = 13;
  return v;
}

TEST(ProofsTest, AProofIsFoundUntilItsLifetimeEnds) {
  int64_t now = 1000;
  Proofs proofs({absl::Seconds(10), nullptr, [&] { return now; }});
  EXPECT_FALSE(proofs.Find("a/1.jpg").has_value());
  proofs.Add("a/1.jpg", Version(5, 100));
  std::optional<FileVersion> found = proofs.Find("a/1.jpg");
  ASSERT_TRUE(found.has_value());
  EXPECT_TRUE(found->SameFileAs(Version(5, 100)));
  EXPECT_EQ(found->inode, 5u);
  EXPECT_FALSE(proofs.Find("a/2.jpg").has_value());
  now += absl::ToInt64Nanoseconds(absl::Seconds(10)) - 1;
  EXPECT_TRUE(proofs.Find("a/1.jpg").has_value());
  now += 1;
  EXPECT_FALSE(proofs.Find("a/1.jpg").has_value());
  // Proving it again starts a new lifetime, with what that open saw.
  proofs.Add("a/1.jpg", Version(6, 200));
  found = proofs.Find("a/1.jpg");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->inode, 6u);
  EXPECT_EQ(found->size, 200u);
  EXPECT_EQ(proofs.size(), 1u);
}

TEST(ProofsTest, AZeroLifetimeKeepsNothing) {
  Proofs proofs({absl::ZeroDuration()});
  proofs.Add("a/1.jpg", Version(5, 100));
  EXPECT_FALSE(proofs.Find("a/1.jpg").has_value());
  EXPECT_EQ(proofs.size(), 0u);
}

TEST(ProofsTest, ManyPathsFromManyThreadsKeepTheirOwnIdentity) {
  Proofs proofs({absl::Hours(1)});
  constexpr int kThreads = 4, kEach = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const int n = t * kEach + i;
        proofs.Add("class/" + std::to_string(n) + ".JPEG", Version(n, n * 3));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(proofs.size(), static_cast<size_t>(kThreads * kEach));
  int wrong = 0;
  for (int n = 0; n < kThreads * kEach; ++n) {
    std::optional<FileVersion> v = proofs.Find("class/" + std::to_string(n) + ".JPEG");
    if (!v.has_value() || v->inode != static_cast<uint64_t>(n) || v->size != n * 3u) ++wrong;
  }
  EXPECT_EQ(wrong, 0);
}

// Proofs take the caller's RAM a chunk at a time; once it is refused, the
// files proven keep their proofs and no new one is kept.
TEST(ProofsTest, ProofsPastTheCallersRoomAreNotKept) {
  int charged = 0;
  ProofLimits limits{absl::Hours(1), [&](uint64_t bytes) -> std::shared_ptr<void> {
                       EXPECT_EQ(bytes, Proofs::kChunk * Proofs::kBytesEach);
                       return ++charged <= 2 ? std::make_shared<int>(0) : nullptr;
                     }};
  Proofs proofs(limits);
  const uint64_t room = 2 * Proofs::kChunk;
  for (uint64_t i = 0; i < room + 10; ++i) proofs.Add(std::to_string(i), Version(i, 1));
  EXPECT_EQ(proofs.size(), room);
  EXPECT_TRUE(proofs.full());
  EXPECT_EQ(charged, 3);
  EXPECT_TRUE(proofs.Find("0").has_value());
  EXPECT_FALSE(proofs.Find(std::to_string(room)).has_value());
  proofs.Add("0", Version(99, 1));  // A proven file is proven again.
  EXPECT_EQ(proofs.Find("0")->inode, 99u);
}

// A folder of two files read through a file source whose opens are counted.
struct Files {
  explicit Files(absl::Duration lifetime) {
    EXPECT_TRUE(testdata::WriteFile(dir + "/a.jpg", "alpha").ok());
    EXPECT_TRUE(testdata::WriteFile(dir + "/b.jpg", "beta").ok());
    src = MakeFileSource(&fs, nullptr, kDefaultMaxFileBytes, {lifetime});
  }
  std::string dir = testdata::MakeTempDir("proofs");
  FaultInjectingFileSystem fs{FileSystem::Default()};
  std::shared_ptr<const SampleSource> src;
};

TEST(FileSourceProofsTest, AFileIdentifiedOnceIsNotOpenedAgainInItsLifetime) {
  Files t(absl::Hours(1));
  absl::StatusOr<SourceKey> first = t.src->Identify(t.dir + "/a.jpg");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_NE(first->opened, nullptr);
  EXPECT_EQ(t.fs.opens.load(), 1u);
  absl::StatusOr<SourceKey> again = t.src->Identify(t.dir + "/a.jpg");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->opened, nullptr);  // Proven: no descriptor, no open.
  EXPECT_EQ(again->key(), first->key());
  EXPECT_EQ(t.fs.opens.load(), 1u);
  ASSERT_TRUE(t.src->Identify(t.dir + "/b.jpg").ok());
  EXPECT_EQ(t.fs.opens.load(), 2u);

  // A miss reads it by opening it again: the bytes as they are now.
  std::string bytes;
  FileVersion version;
  ASSERT_TRUE(t.src->ReadIdentified(*again, t.dir + "/a.jpg", &bytes, &version).ok());
  EXPECT_EQ(bytes, "alpha");
  EXPECT_TRUE(version.SameFileAs(again->version));
  EXPECT_EQ(t.fs.reads.load(), 1u);
}

// A proven file replaced (another inode, as a rename or a new symlink
// makes it): a miss reads nothing under the old identity, and the file is
// identified afresh.
TEST(FileSourceProofsTest, AFileReplacedIsNotReadUnderItsOldIdentity) {
  Files t(absl::Hours(1));
  const std::string a = t.dir + "/a.jpg";
  absl::StatusOr<SourceKey> old = t.src->Identify(a);
  ASSERT_TRUE(old.ok());
  ASSERT_TRUE(testdata::WriteFile(a + ".new", "alpha, edited").ok());
  ASSERT_EQ(rename((a + ".new").c_str(), a.c_str()), 0);
  // Still the proven identity: the caches hold what it names.
  absl::StatusOr<SourceKey> proven = t.src->Identify(a);
  ASSERT_TRUE(proven.ok());
  EXPECT_EQ(proven->key(), old->key());
  std::string bytes;
  FileVersion version;
  absl::Status s = t.src->ReadIdentified(*proven, a, &bytes, &version);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_TRUE(bytes.empty());
  // Proven anew, as it is now, and read under that identity.
  absl::StatusOr<SourceKey> now = t.src->Identify(a);
  ASSERT_TRUE(now.ok());
  EXPECT_NE(now->key(), old->key());
  ASSERT_TRUE(t.src->ReadIdentified(*now, a, &bytes, &version).ok());
  EXPECT_EQ(bytes, "alpha, edited");
  EXPECT_TRUE(version.SameFileAs(now->version));
}

// Past its lifetime a proof is gone: the next Identify opens the file, and
// a file the caller may no longer open is refused.
TEST(FileSourceProofsTest, AnExpiredProofOpensTheFileAgain) {
  int64_t now = 0;
  FaultInjectingFileSystem fs{FileSystem::Default()};
  const std::string dir = testdata::MakeTempDir("proofs-expire");
  ASSERT_TRUE(testdata::WriteFile(dir + "/a.jpg", "alpha").ok());
  auto src = MakeFileSource(&fs, nullptr, kDefaultMaxFileBytes,
                            {absl::Minutes(10), nullptr, [&] { return now; }});
  ASSERT_TRUE(src->Identify(dir + "/a.jpg").ok());
  ASSERT_EQ(unlink((dir + "/a.jpg").c_str()), 0);
  now += absl::ToInt64Nanoseconds(absl::Minutes(10)) - 1;
  EXPECT_TRUE(src->Identify(dir + "/a.jpg").ok());  // Proven: not opened.
  EXPECT_EQ(fs.opens.load(), 1u);
  now += 1;
  EXPECT_EQ(src->Identify(dir + "/a.jpg").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(fs.opens.load(), 2u);
}

TEST(FileSourceProofsTest, WithoutALifetimeEveryIdentifyOpens) {
  Files t(absl::ZeroDuration());
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<SourceKey> id = t.src->Identify(t.dir + "/a.jpg");
    ASSERT_TRUE(id.ok());
    EXPECT_NE(id->opened, nullptr);
  }
  EXPECT_EQ(t.fs.opens.load(), 3u);
}

}  // namespace
}  // namespace stoker
