#include "server/access/file_system.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "tests/testdata.h"

namespace stoker {
namespace {
namespace fs = std::filesystem;

class FileSystemTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = testdata::MakeTempDir("fsenv"); }
  void TearDown() override { fs::remove_all(root_); }

  // A confinement to root_ with `guard`.
  std::unique_ptr<Beneath> Confined(std::shared_ptr<const FileGuard> guard = nullptr) {
    auto b = std::make_unique<Beneath>();
    b->dir_fd = open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    b->prefix = root_;
    b->guard = std::move(guard);
    return b;
  }

  absl::StatusCode ReadCode(const std::string& path, const Beneath* beneath = nullptr,
                            uint64_t max_bytes = kDefaultMaxFileBytes) {
    std::string bytes;
    return FileSystem::Default()->ReadFile(path, &bytes, nullptr, beneath, max_bytes).code();
  }

  std::string root_;
};

// A FIFO, confined or not, is refused at once: opening it for reading would
// otherwise wait for a writer, holding a reader thread for ever.
TEST_F(FileSystemTest, FifoIsRefusedWithoutBlocking) {
  const std::string fifo = root_ + "/a.jpg";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_EQ(ReadCode(fifo), absl::StatusCode::kFailedPrecondition);
  auto confined = Confined();
  std::string bytes;
  absl::Status s = FileSystem::Default()->ReadFile(fifo, &bytes, nullptr, confined.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("a FIFO"), std::string::npos) << s;
  EXPECT_EQ(FileSystem::Default()->Open(fifo, confined.get()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(FileSystemTest, DevicesFoldersAndSocketsAreRefused) {
  std::string bytes;
  absl::Status zero = FileSystem::Default()->ReadFile("/dev/zero", &bytes, nullptr);
  EXPECT_EQ(zero.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(zero.message().find("character device"), std::string::npos) << zero;
  EXPECT_EQ(ReadCode(root_), absl::StatusCode::kFailedPrecondition);
  // A listening Unix socket cannot be opened at all (ENXIO).
  const std::string sock = root_ + "/s.jpg";
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, sock.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(ReadCode(sock), absl::StatusCode::kFailedPrecondition);
  close(fd);
}

// A terabyte sparse file costs nothing on disk; the size cap is checked
// before anything is allocated.
TEST_F(FileSystemTest, SparseTerabyteIsRefusedBeforeAllocating) {
  const std::string big = root_ + "/big.jpg";
  const int fd = open(big.c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, off_t{1} << 40), 0);
  close(fd);
  std::string bytes;
  absl::Status s = FileSystem::Default()->ReadFile(big, &bytes, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("1099511627776 bytes"), std::string::npos) << s;
  EXPECT_LT(bytes.capacity(), 1024u);
  // A cap of its own size reads a small file; one byte less refuses it.
  ASSERT_TRUE(testdata::WriteFile(root_ + "/small.jpg", "12345").ok());
  EXPECT_EQ(ReadCode(root_ + "/small.jpg", nullptr, 5), absl::StatusCode::kOk);
  EXPECT_EQ(ReadCode(root_ + "/small.jpg", nullptr, 4), absl::StatusCode::kResourceExhausted);
}

TEST_F(FileSystemTest, GuardRefusesTheDaemonsOwnFiles) {
  ASSERT_TRUE(testdata::WriteFile(root_ + "/mine.jpg", "x").ok());
  struct stat st;
  ASSERT_EQ(stat((root_ + "/mine.jpg").c_str(), &st), 0);
  // Owner rule: this process plays the daemon.
  auto owner = std::make_shared<FileGuard>();
  owner->daemon_uid = geteuid();
  auto confined = Confined(owner);
  std::string bytes;
  absl::Status s = FileSystem::Default()->ReadFile(root_ + "/mine.jpg", &bytes, nullptr,
                                                  confined.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("daemon's own files"), std::string::npos) << s;
  EXPECT_EQ(FileSystem::Default()->Open(root_ + "/mine.jpg", confined.get()).status().code(),
            absl::StatusCode::kPermissionDenied);
  // Device rule (as for /dev/shm) and inode rule (as for L2's files).
  auto device = std::make_shared<FileGuard>();
  device->devices.push_back(st.st_dev);
  EXPECT_EQ(ReadCode(root_ + "/mine.jpg", Confined(device).get()),
            absl::StatusCode::kPermissionDenied);
  auto inode = std::make_shared<FileGuard>();
  inode->inodes.emplace_back(st.st_dev, st.st_ino);
  EXPECT_EQ(ReadCode(root_ + "/mine.jpg", Confined(inode).get()),
            absl::StatusCode::kPermissionDenied);
  // Another file on the same device, under a guard naming only that inode.
  ASSERT_TRUE(testdata::WriteFile(root_ + "/other.jpg", "y").ok());
  EXPECT_EQ(ReadCode(root_ + "/other.jpg", Confined(inode).get()), absl::StatusCode::kOk);
  // Unconfined callers (admins) are not guarded.
  EXPECT_EQ(ReadCode(root_ + "/mine.jpg"), absl::StatusCode::kOk);
}

// A confinement names its folder: paths outside it, or through "..", are
// refused; a symlink leads where it leads (the caller's own open follows
// it), and what it reaches is checked as any file is.
TEST_F(FileSystemTest, ConfinementIsItsFolderAndItsSymlinks) {
  fs::create_directories(root_ + "/in");
  ASSERT_TRUE(testdata::WriteFile(root_ + "/secret.jpg", "s").ok());
  ASSERT_TRUE(testdata::WriteFile(root_ + "/in/a.jpg", "a").ok());
  fs::create_symlink(root_ + "/secret.jpg", root_ + "/in/link.jpg");
  fs::create_symlink("/dev/zero", root_ + "/in/zero.jpg");
  auto b = std::make_unique<Beneath>();
  b->dir_fd = open((root_ + "/in").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  b->prefix = root_ + "/in";
  EXPECT_EQ(ReadCode(root_ + "/in/a.jpg", b.get()), absl::StatusCode::kOk);
  EXPECT_EQ(ReadCode(root_ + "/in/link.jpg", b.get()), absl::StatusCode::kOk);
  EXPECT_EQ(ReadCode(root_ + "/in/zero.jpg", b.get()), absl::StatusCode::kFailedPrecondition);
  // A symlink to one of the daemon's own files is refused as that file is.
  struct stat st;
  ASSERT_EQ(stat((root_ + "/secret.jpg").c_str(), &st), 0);
  auto guard = std::make_shared<FileGuard>();
  guard->inodes.emplace_back(st.st_dev, st.st_ino);
  b->guard = guard;
  EXPECT_EQ(ReadCode(root_ + "/in/link.jpg", b.get()), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ReadCode(root_ + "/in/../secret.jpg", b.get()),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ReadCode(root_ + "/secret.jpg", b.get()), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ReadCode(root_ + "/inside.jpg", b.get()), absl::StatusCode::kPermissionDenied);
}

TEST_F(FileSystemTest, ListFolderFollowsSymlinksButNotDotDot) {
  fs::create_directories(root_ + "/in/sub");
  fs::create_directories(root_ + "/out");
  ASSERT_TRUE(testdata::WriteFile(root_ + "/in/b.nii", "b").ok());
  ASSERT_TRUE(testdata::WriteFile(root_ + "/in/a.nii", "a").ok());
  fs::create_directory_symlink(root_ + "/out", root_ + "/in/away");
  auto b = std::make_unique<Beneath>();
  b->dir_fd = open((root_ + "/in").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  b->prefix = root_ + "/in";
  absl::StatusOr<std::vector<std::string>> names = ListFolder(root_ + "/in/", b.get(), 10);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(*names, (std::vector<std::string>{"a.nii", "away", "b.nii", "sub"}));
  EXPECT_TRUE(ListFolder(root_ + "/in/sub", b.get(), 10).ok());
  EXPECT_TRUE(ListFolder(root_ + "/in/away", b.get(), 10).ok());
  EXPECT_EQ(ListFolder(root_ + "/in/../out", b.get(), 10).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ListFolder(root_ + "/out", b.get(), 10).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ListFolder(root_ + "/in/a.nii", b.get(), 10).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ListFolder(root_ + "/in/none", b.get(), 10).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ListFolder(root_ + "/in", b.get(), 3).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(ListFolder(root_ + "/out", nullptr, 10).ok());  // Admins: anywhere.
}

// An open file names the file it was opened as, and reading it later reads
// those bytes even when the path has been given to another file since.
TEST_F(FileSystemTest, OpenNamesTheFileAndReadsItsBytes) {
  ASSERT_TRUE(testdata::WriteFile(root_ + "/a.jpg", "abc").ok());
  struct stat st;
  ASSERT_EQ(stat((root_ + "/a.jpg").c_str(), &st), 0);
  auto file = FileSystem::Default()->Open(root_ + "/a.jpg", Confined().get());
  ASSERT_TRUE(file.ok()) << file.status();
  const FileVersion v = (*file)->version();
  EXPECT_EQ(v.size, 3u);
  EXPECT_EQ(v.device, static_cast<uint64_t>(st.st_dev));
  EXPECT_EQ(v.inode, static_cast<uint64_t>(st.st_ino));
  ASSERT_TRUE(testdata::WriteFile(root_ + "/b.jpg", "replaced").ok());
  ASSERT_EQ(rename((root_ + "/b.jpg").c_str(), (root_ + "/a.jpg").c_str()), 0);
  std::string bytes;
  ASSERT_TRUE(FileSystem::Default()->ReadOpened(**file, root_ + "/a.jpg", &bytes).ok());
  EXPECT_EQ(bytes, "abc");
  EXPECT_EQ(FileSystem::Default()->ReadOpened(**file, "a.jpg", &bytes, 2).code(),
            absl::StatusCode::kResourceExhausted);
  FileVersion read;
  ASSERT_TRUE(FileSystem::Default()->ReadFile(root_ + "/a.jpg", &bytes, &read).ok());
  EXPECT_NE(read.inode, v.inode);
  EXPECT_EQ(bytes, "replaced");
}

}  // namespace
}  // namespace stoker
