// The caller's opener, both ends in one process: descriptors come back for
// the paths asked, beneath the folder only, from many threads at once; a
// client that lies, floods or stalls breaks its own channel and leaks
// nothing into the daemon.
#include "shm/open_channel.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "shm/fd_passing.h"

namespace stoker::shm {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/stoker-opener-XXXXXX";
  return mkdtemp(tmpl);
}

int OpenFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (readdir(d) != nullptr) ++n;
  closedir(d);
  return n;
}

std::string ReadAll(int fd) {
  std::string out(64, '\0');
  const ssize_t n = pread(fd, out.data(), out.size(), 0);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

class OpenChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir();
    std::filesystem::create_directories(dir_ + "/sub");
    std::ofstream(dir_ + "/a.txt") << "alpha";
    std::ofstream(dir_ + "/sub/b.txt") << "beta";
    std::ofstream(outside_ = dir_ + "-outside") << "secret";
    std::filesystem::create_symlink(outside_, dir_ + "/escape");
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    std::filesystem::remove(outside_);
  }
  // A served channel over `dir_`.
  std::unique_ptr<OpenChannel> Serve(std::unique_ptr<OpenServer>* server,
                                     absl::Duration timeout = absl::Seconds(30)) {
    auto pair = OpenChannelPair();
    EXPECT_TRUE(pair.ok());
    const int folder = open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    *server = std::make_unique<OpenServer>(pair->first, folder);
    return std::make_unique<OpenChannel>(pair->second, timeout);
  }
  std::string dir_, outside_;
};

TEST_F(OpenChannelTest, PathsComeBackAsDescriptorsInOneRequest) {
  std::unique_ptr<OpenServer> server;
  auto channel = Serve(&server);
  std::vector<int> fds, errs;
  ASSERT_TRUE(channel
                  ->Open({{OpenOp::kOpenFile, "a.txt"},
                          {OpenOp::kOpenFile, "missing"},
                          {OpenOp::kOpenFile, "sub/b.txt"},
                          {OpenOp::kOpenFile, "escape"},
                          {OpenOp::kOpenFile, "../" + outside_.substr(outside_.rfind('/') + 1)},
                          {OpenOp::kOpenFolder, "."},
                          {OpenOp::kOpenFolder, "a.txt"}},
                         &fds, &errs)
                  .ok());
  ASSERT_EQ(fds.size(), 7u);
  EXPECT_EQ(ReadAll(fds[0]), "alpha");
  EXPECT_EQ(errs[1], ENOENT);
  EXPECT_EQ(fds[1], -1);
  EXPECT_EQ(ReadAll(fds[2]), "beta");
  // A symlink out of the folder leads where it leads, as the caller's
  // own open follows it; ".." is refused.
  EXPECT_EQ(ReadAll(fds[3]), "secret");
  EXPECT_EQ(errs[4], EXDEV);
  struct stat st {};
  ASSERT_GE(fds[5], 0);
  ASSERT_EQ(fstat(fds[5], &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(errs[6], ENOTDIR);
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
  EXPECT_EQ(server->opened(), 4u);
}

// Paths on either side are opened alike: no "..", no absolute path, no
// magic link; symlinks followed.
TEST_F(OpenChannelTest, OpenInFolderRefusesOnlyDotDotAbsoluteAndMagicLinks) {
  const int folder = open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(folder, 0);
  const uint64_t flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK;
  for (const char* up : {"..", "../x", "sub/../a.txt", "sub/..", "/etc/hostname"}) {
    errno = 0;
    EXPECT_EQ(OpenInFolder(folder, up, flags), -1) << up;
    EXPECT_EQ(errno, EXDEV) << up;
  }
  for (const char* fine : {"a.txt", "./a.txt", "sub//b.txt", "escape", "..a", "sub/..b"}) {
    const int fd = OpenInFolder(folder, fine, flags);
    EXPECT_TRUE(fd >= 0 || errno == ENOENT) << fine << " " << errno;
    if (fd >= 0) close(fd);
  }
  std::filesystem::create_symlink("/proc/self/fd/0", dir_ + "/magic");
  errno = 0;
  EXPECT_EQ(OpenInFolder(folder, "magic", flags), -1);
  EXPECT_EQ(errno, ELOOP);
  close(folder);
}

TEST_F(OpenChannelTest, ManyThreadsShareOneChannel) {
  std::unique_ptr<OpenServer> server;
  auto channel = Serve(&server);
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        int err = 0;
        absl::StatusOr<int> fd =
            channel->OpenOne(OpenOp::kOpenFile, (i + t) % 2 ? "a.txt" : "sub/b.txt", &err);
        if (fd.ok() && *fd >= 0 && ReadAll(*fd) == ((i + t) % 2 ? "alpha" : "beta")) ++good;
        if (fd.ok() && *fd >= 0) close(*fd);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), 1600);
}

TEST_F(OpenChannelTest, AGoneClientIsUnavailableAtOnce) {
  std::unique_ptr<OpenServer> server;
  auto channel = Serve(&server);
  server.reset();
  int err = 0;
  absl::StatusOr<int> fd = channel->OpenOne(OpenOp::kOpenFile, "a.txt", &err);
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kUnavailable) << fd.status();
  EXPECT_EQ(channel->OpenOne(OpenOp::kOpenFile, "a.txt", &err).status().code(),
            absl::StatusCode::kUnavailable);
}

// A hostile client: it answers with the wrong number of descriptors, with
// an O_PATH descriptor, or not at all. Each breaks only its own channel (or
// that one path), and every descriptor it sent is closed.
TEST_F(OpenChannelTest, LyingClientsLeakNothing) {
  const int before = OpenFds();
  for (int lie = 0; lie < 3; ++lie) {
    auto pair = OpenChannelPair();
    ASSERT_TRUE(pair.ok());
    auto channel = std::make_unique<OpenChannel>(
        pair->second, absl::Milliseconds(lie == 2 ? 300 : 10'000));
    std::thread client([&, fd = pair->first] {
      char buf[4096];
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n < 8 || lie == 2) {  // lie 2: never answers.
        char more;
        recv(fd, &more, 1, 0);  // Until the daemon gives up.
        close(fd);
        return;
      }
      std::string answer(buf, 8);  // Its id, count 1.
      const uint32_t zero = 0;
      answer.append(reinterpret_cast<const char*>(&zero), 4);
      const int a = open((dir_ + "/a.txt").c_str(), lie == 1 ? O_PATH : O_RDONLY);
      const int b = open((dir_ + "/a.txt").c_str(), O_RDONLY);
      // lie 0: two descriptors for one entry; lie 1: one O_PATH one.
      std::vector<int> fds = lie == 0 ? std::vector<int>{a, b} : std::vector<int>{a};
      SendWithFds(fd, answer, fds).IgnoreError();
      close(a);
      close(b);
      char more;
      recv(fd, &more, 1, 0);
      close(fd);
    });
    int err = 0;
    absl::StatusOr<int> fd = channel->OpenOne(OpenOp::kOpenFile, "a.txt", &err);
    if (lie == 1) {
      ASSERT_TRUE(fd.ok()) << fd.status();
      EXPECT_EQ(*fd, -1);
      EXPECT_EQ(err, EBADF);
    } else {
      EXPECT_EQ(fd.status().code(), absl::StatusCode::kUnavailable) << fd.status();
      EXPECT_EQ(channel->broken().code(), absl::StatusCode::kUnavailable);
    }
    channel.reset();  // Closes the daemon's end: the client's recv ends.
    client.join();
  }
  EXPECT_EQ(OpenFds(), before);
}

// A signer: signatures come back for what it accepts, its words for what
// it refuses, from many threads at once; it opens nothing.
TEST(SignChannel, SignsRefusesAndOpensNothing) {
  absl::StatusOr<ServedSigner> served =
      ServeSigner([](const std::string& r) -> absl::StatusOr<std::string> {
        if (r.rfind("GET\n", 0) != 0) return absl::PermissionDeniedError("only GET: " + r);
        return "signed:" + r;
      });
  ASSERT_TRUE(served.ok()) << served.status();
  OpenChannel channel(served->channel_fd);
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const std::string r = "GET\n" + std::to_string(t * 1000 + i);
        absl::StatusOr<std::string> s = channel.Sign(r);
        good += s.ok() && *s == "signed:" + r;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(good.load(), 400);
  absl::StatusOr<std::string> refused = channel.Sign("PUT\nx");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("only GET: PUT"), std::string::npos);
  int err = 0;
  absl::StatusOr<int> fd = channel.OpenOne(OpenOp::kOpenFile, "etc/passwd", &err);
  ASSERT_TRUE(fd.ok()) << fd.status();
  EXPECT_EQ(*fd, -1);
  EXPECT_EQ(err, EACCES);
  EXPECT_TRUE(channel.broken().ok());
}

// An opener that cannot sign (an older client's) says so; a folder's
// opener signs nothing.
TEST_F(OpenChannelTest, AnOpenerWithoutASignerCannotSign) {
  std::unique_ptr<OpenServer> server;
  auto channel = Serve(&server);
  EXPECT_EQ(channel->Sign("GET\nx").status().code(), absl::StatusCode::kUnimplemented);
  int err = 0;
  EXPECT_TRUE(channel->OpenOne(OpenOp::kOpenFile, "a.txt", &err).ok());
}

// Texts whose lengths lie break the channel, and nothing else.
TEST(SignChannel, LyingLengthsBreakTheChannel) {
  for (uint32_t lie : {uint32_t{5}, uint32_t{1} << 31, uint32_t{0}}) {
    auto pair = OpenChannelPair();
    ASSERT_TRUE(pair.ok());
    OpenChannel channel(pair->second, absl::Seconds(10));
    std::thread client([fd = pair->first, lie] {
      char buf[4096];
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n >= 8) {
        std::string answer(buf, 8);  // Its id, count 1.
        const uint32_t zero = 0;
        answer.append(reinterpret_cast<const char*>(&zero), 4);
        answer.append(reinterpret_cast<const char*>(&lie), 4);
        answer.append("abc");  // Three bytes, whatever the length says.
        SendWithFds(fd, answer, {}).IgnoreError();
      }
      char more;
      recv(fd, &more, 1, 0);
      close(fd);
    });
    absl::StatusOr<std::string> s = channel.Sign("GET\nx");
    EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable) << lie << " " << s.status();
    EXPECT_EQ(channel.broken().code(), absl::StatusCode::kUnavailable);
    shutdown(pair->second, SHUT_RDWR);
    client.join();
  }
}

// The ring socket's exchanges take one descriptor, or two: a message that
// carries more never leaves one open.
TEST(FdPassingAccounting, ExtraDescriptorsAreClosed) {
  const int before = OpenFds();
  for (int round = 0; round < 50; ++round) {
    int pair[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
    const int a = open("/dev/null", O_RDONLY), b = open("/dev/null", O_RDONLY),
              c = open("/dev/null", O_RDONLY);
    ASSERT_TRUE(SendWithFds(pair[0], "x\n", {a, b, c}).ok());
    close(a);
    close(b);
    close(c);
    std::string message;
    int fd = -1;
    ASSERT_TRUE(ReceiveWithFd(pair[1], 64, &message, &fd).ok());
    EXPECT_GE(fd, 0);
    close(fd);
    close(pair[0]);
    close(pair[1]);
  }
  EXPECT_EQ(OpenFds(), before);
}

}  // namespace
}  // namespace stoker::shm
