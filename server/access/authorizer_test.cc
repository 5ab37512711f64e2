#include "server/access/authorizer.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <vector>
#include <string>

#include "gtest/gtest.h"
#include "server/access/root_testing.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

TEST(AuthorizerTest, TokensProveOneUidEach) {
  Authorizer auth(true, -1);
  const std::string t = auth.IssueToken(5001);
  EXPECT_EQ(auth.IssueToken(5001), t);  // One per uid for the daemon's life.
  EXPECT_NE(auth.IssueToken(5002), t);
  EXPECT_GE(t.size(), 32u);
  auto who = auth.Authenticate(t);
  ASSERT_TRUE(who.ok()) << who.status();
  EXPECT_EQ(who->uid, 5001);
  EXPECT_FALSE(who->admin);
  // The daemon's own user is an admin; nobody else is without the group.
  auto self = auth.Authenticate(auth.IssueToken(geteuid()));
  ASSERT_TRUE(self.ok());
  EXPECT_TRUE(self->admin);
  EXPECT_EQ(auth.Authenticate("0123").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(auth.Authenticate("").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(auth.Authenticate(t.substr(0, t.size() - 1)).status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(AuthorizerTest, TheAdminGroupMakesAdmins) {
  struct passwd* nobody = getpwnam("nobody");
  ASSERT_NE(nobody, nullptr) << "Debian has a nobody user";
  const uid_t uid = nobody->pw_uid;
  const gid_t gid = nobody->pw_gid;
  EXPECT_FALSE(Authorizer(true, -1).IsAdmin(uid));
  EXPECT_TRUE(Authorizer(true, gid).IsAdmin(uid));   // Its primary group.
  EXPECT_FALSE(Authorizer(true, gid + 1000).IsAdmin(uid));
  Authorizer auth(true, gid);
  EXPECT_TRUE(auth.Authenticate(auth.IssueToken(uid))->admin);
  EXPECT_TRUE(Authorizer::RequireAdmin(Caller(), "resizing pools").ok());
  absl::Status s = Authorizer::RequireAdmin(Caller::User(5001, false), "resizing pools");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "resizing pools is for admins (the daemon's user or its "
                         "--admin-group); uid 5001 is none");
}

class ConfineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testdata::MakeTempDir("authorizer");
    std::filesystem::create_directories(root_ + "/data");
    std::filesystem::create_directories(root_ + "/other");
    spec_.mutable_folder()->set_path(root_ + "/data");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  int Open(const std::string& dir, int flags = O_RDONLY) {
    return open((root_ + "/" + dir).c_str(), flags | O_DIRECTORY | O_CLOEXEC);
  }
  absl::StatusCode Confine(Authorizer& auth, const std::string& token, int64_t uid) {
    spec_.set_root_token(token);
    return auth.Confine(spec_, Caller::User(uid, false)).status().code();
  }

  std::string root_;
  v1::DatasetSpec spec_;
  const absl::StatusCode kDenied = absl::StatusCode::kPermissionDenied;
};

TEST_F(ConfineTest, AdminsAndInProcessCallersAreNotConfined) {
  Authorizer open_daemon(false, -1);
  auto none = open_daemon.Confine(spec_, Caller::User(5001, false));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
  Authorizer auth(true, -1);
  auto admin = auth.Confine(spec_, Caller::User(5001, true));
  ASSERT_TRUE(admin.ok());
  EXPECT_EQ(*admin, nullptr);
}

TEST_F(ConfineTest, ADatasetWithNoLocalPathReachesNoLocalFile) {
  // An object store's dataset proves no folder, and its confinement opens
  // nothing on this machine, absolute or relative.
  Authorizer auth(true, -1);
  v1::DatasetSpec s3;
  s3.mutable_s3()->set_url("s3://bucket/train/");
  absl::StatusOr<std::shared_ptr<Beneath>> b = auth.Confine(s3, Caller::User(5001, false));
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_NE(*b, nullptr);
  ASSERT_TRUE(testdata::WriteFile(root_ + "/data/a.jpg", "x").ok());
  FileSystem* fs = FileSystem::Default();
  for (const std::string& path : {root_ + "/data/a.jpg", std::string("/etc/passwd"),
                                  std::string("data/a.jpg")}) {
    std::string out;
    EXPECT_FALSE(fs->ReadFile(path, &out, nullptr, b->get(), 1 << 20).ok()) << path;
    EXPECT_FALSE(fs->Open(path, b->get()).ok()) << path;
    EXPECT_FALSE(ReadHead(path, b->get(), 16).ok()) << path;
  }
  for (const std::string& dir : {root_ + "/data", std::string("/"), std::string("data")}) {
    EXPECT_FALSE(ListFolderEntries(dir, b->get(), 100).ok()) << dir;
  }
}

TEST_F(ConfineTest, AnObjectStoreDatasetsLocalManifestIsConfinedToItsFolder) {
  Authorizer auth(true, -1);
  v1::DatasetSpec s3;
  s3.mutable_s3()->set_url("s3://bucket/train/");
  // A manifest in the bucket: no local file, nothing to prove.
  s3.mutable_s3()->set_manifest("s3://bucket/lists/train.tsv");
  absl::StatusOr<std::shared_ptr<Beneath>> b = auth.Confine(s3, Caller::User(5001, false));
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_NE(*b, nullptr);
  EXPECT_LT((*b)->dir_fd, 0);
  // A local one (even one that does not exist, or is not a file to the
  // daemon): its folder, proven by the caller's root, or nothing.
  s3.mutable_s3()->set_manifest(root_ + "/data/lists.tsv");
  b = auth.Confine(s3, Caller::User(5001, false));
  EXPECT_EQ(b.status().code(), kDenied);
  EXPECT_NE(b.status().message().find("folder " + root_ + "/data"), std::string::npos)
      << b.status();
  ServedRoot mine = RegisterServedRoot(auth, root_ + "/data", 5001);
  s3.set_root_token(mine.token);
  b = auth.Confine(s3, Caller::User(5001, false));
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_NE(*b, nullptr);
  EXPECT_EQ((*b)->prefix, root_ + "/data");
  ASSERT_NE((*b)->opener, nullptr);
}

TEST_F(ConfineTest, OnlyTheUidsOwnFolderAndOpenerConfine) {
  Authorizer auth(true, -1);
  spec_.set_root_token("");
  auto none = auth.Confine(spec_, Caller::User(5001, false));
  EXPECT_EQ(none.status().code(), kDenied);
  EXPECT_NE(none.status().message().find("uid 5001 has not shown it can open the dataset "
                                         "folder " + root_ + "/data"),
            std::string::npos) << none.status();
  // Another uid's root: refused, and still there for its owner.
  ServedRoot theirs = RegisterServedRoot(auth, root_ + "/data", 5002);
  EXPECT_EQ(Confine(auth, theirs.token, 5001), kDenied);
  EXPECT_EQ(Confine(auth, theirs.token, 5002), absl::StatusCode::kOk);
  // An O_PATH descriptor; a folder without an opener, or with something
  // else in its place (a stream socket, a file).
  auto pair = shm::OpenChannelPair();
  ASSERT_TRUE(pair.ok());
  close(pair->first);
  EXPECT_EQ(Confine(auth, auth.RegisterRoot(Open("data", O_PATH), pair->second, 5001), 5001),
            kDenied);
  spec_.set_root_token(auth.RegisterRoot(Open("data"), -1, 5001));
  none = auth.Confine(spec_, Caller::User(5001, false));
  EXPECT_EQ(none.status().code(), kDenied);
  EXPECT_NE(none.status().message().find("did not hand over an opener"), std::string::npos)
      << none.status();
  int stream[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, stream), 0);
  close(stream[0]);
  EXPECT_EQ(Confine(auth, auth.RegisterRoot(Open("data"), stream[1], 5001), 5001), kDenied);
  EXPECT_EQ(Confine(auth, auth.RegisterRoot(Open("data"), Open("other"), 5001), 5001), kDenied);
  // The right one: a Beneath of that folder with the client's opener, used
  // once.
  ServedRoot mine = RegisterServedRoot(auth, root_ + "/data", 5001);
  spec_.set_root_token(mine.token);
  auto confined = auth.Confine(spec_, Caller::User(5001, false));
  ASSERT_TRUE(confined.ok()) << confined.status();
  ASSERT_NE(*confined, nullptr);
  EXPECT_EQ((*confined)->prefix, root_ + "/data");
  ASSERT_NE((*confined)->opener, nullptr);
  struct stat a {}, b {};
  ASSERT_EQ(fstat((*confined)->dir_fd, &a), 0);
  ASSERT_EQ(stat((root_ + "/data").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_EQ(Confine(auth, mine.token, 5001), kDenied);  // Consumed.
  // Its files are the client's opens: once the client is gone, none is.
  ASSERT_TRUE(ListFolder(root_ + "/data", confined->get(), 10).ok());
  const uint64_t opened = mine.server->opened();
  EXPECT_EQ(opened, 1u);
  mine.server.reset();
  EXPECT_EQ(ListFolder(root_ + "/data", confined->get(), 10).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(ConfineTest, TheDaemonsOwnFoldersAreRefused) {
  Authorizer auth(true, -1);
  struct stat st {};
  ASSERT_EQ(stat((root_ + "/data").c_str(), &st), 0);
  auto guard = std::make_shared<FileGuard>();
  guard->inodes.emplace_back(st.st_dev, st.st_ino);  // As if its L2 folder.
  auth.SetGuard(guard);
  ServedRoot data = RegisterServedRoot(auth, root_ + "/data", 5001);
  spec_.set_root_token(data.token);
  auto refused = auth.Confine(spec_, Caller::User(5001, false));
  EXPECT_EQ(refused.status().code(), kDenied) << refused.status();
  // Another folder passes, and carries the guard for what lies beneath.
  spec_.mutable_folder()->set_path(root_ + "/other");
  ServedRoot other = RegisterServedRoot(auth, root_ + "/other", 5001);
  spec_.set_root_token(other.token);
  auto kept = auth.Confine(spec_, Caller::User(5001, false));
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ((*kept)->guard, guard);
}

// One user flooding the table of pending roots evicts only its own oldest:
// another user's root, registered first, still confines.
TEST_F(ConfineTest, PendingRootsAreCountedPerUser) {
  Authorizer auth(true, -1);
  ServedRoot victim = RegisterServedRoot(auth, root_ + "/data", 5002);
  ServedRoot first = RegisterServedRoot(auth, root_ + "/data", 5001);
  std::vector<ServedRoot> flood;
  for (size_t i = 0; i < 4 * Authorizer::kMaxPendingRootsPerUser; ++i) {
    flood.push_back(RegisterServedRoot(auth, root_ + "/data", 5001));
  }
  EXPECT_EQ(Confine(auth, victim.token, 5002), absl::StatusCode::kOk);
  EXPECT_EQ(Confine(auth, first.token, 5001), kDenied);  // Its own, evicted.
  EXPECT_EQ(Confine(auth, flood.back().token, 5001), absl::StatusCode::kOk);
}

// Roots never used are closed with the authorizer: no descriptor leaks.
TEST_F(ConfineTest, UnusedRootsAreClosed) {
  const int fd = Open("data");
  auto pair = shm::OpenChannelPair();
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(pair.ok());
  {
    Authorizer auth(true, -1);
    auth.RegisterRoot(fd, pair->second, 5001);
    EXPECT_EQ(fcntl(fd, F_GETFD), FD_CLOEXEC);
  }
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(fcntl(pair->second, F_GETFD), -1);
  close(pair->first);
}

}  // namespace
}  // namespace stoker
