// Socket hygiene: folders others can write are refused, a socket's mode is
// never set through a symlink, and a descriptor crosses a socket pair.
#include "shm/fd_passing.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fcntl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace stoker::shm {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/stoker-fdp-XXXXXX";
  return mkdtemp(tmpl);
}

TEST(SocketFolder, OnlyOwnerWritableFoldersAreAccepted) {
  const std::string dir = TempDir();
  EXPECT_TRUE(CheckSocketFolder(dir + "/s.sock", geteuid()).ok());
  chmod(dir.c_str(), 0775);
  absl::Status s = CheckSocketFolder(dir + "/s.sock", geteuid());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("mode 0775"), std::string::npos) << s;
  chmod(dir.c_str(), 01777);
  EXPECT_EQ(ClaimSocketPath(dir + "/s.sock").code(),
            absl::StatusCode::kFailedPrecondition);
  std::filesystem::remove_all(dir);
}

TEST(SocketFolder, ModeIsNeverSetThroughASymlink) {
  const std::string dir = TempDir();
  const std::string victim = dir + "/victim";
  std::ofstream(victim) << "x";
  chmod(victim.c_str(), 0600);
  std::filesystem::create_symlink(victim, dir + "/s.sock");
  EXPECT_EQ(SetSocketMode(dir + "/s.sock", 0666).code(),
            absl::StatusCode::kFailedPrecondition);
  struct stat st {};
  ASSERT_EQ(stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::filesystem::remove_all(dir);
}

// The server's folder is looked at as named: one reached through a
// symlink, however spelled ("link/.", "link//"), is refused; the folder
// itself passes (this process's own server, in its own 0700 folder).
TEST(SocketFolder, TheServersFolderIsNeverReachedThroughASymlink) {
  const std::string dir = TempDir();
  const std::string real = dir + "/real";
  ASSERT_EQ(mkdir(real.c_str(), 0700), 0);
  std::filesystem::create_directory_symlink(real, dir + "/link");
  const int listener = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = real + "/s.sock";
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  absl::StatusOr<int> sock = ConnectUnix(path, absl::Seconds(5));
  ASSERT_TRUE(sock.ok()) << sock.status();
  EXPECT_TRUE(VerifyServer(*sock, path).ok()) << VerifyServer(*sock, path);
  for (const std::string& via : {dir + "/link/s.sock", dir + "/link/./s.sock",
                                 dir + "/link//s.sock", dir + "/real/link/../s.sock"}) {
    absl::Status s = VerifyServer(*sock, via);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << via << ": " << s;
  }
  close(*sock);
  close(listener);
  std::filesystem::remove_all(dir);
}

// A peer that drips a byte at a time (the attack's own pace, not a race)
// holds the exchange no longer than its one deadline: the receive gives up
// long before the 100 bytes the peer would take 10 s to send.
TEST(FdPassing, OneDeadlineForTheWholeMessage) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  std::atomic<bool> stop{false};
  std::atomic<int> sent{0};
  std::thread dripper([&] {
    for (int i = 0; i < 100 && !stop.load(); ++i) {
      if (write(sv[1], "x", 1) != 1) break;
      sent.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::string message;
  int fd = -1;
  absl::Status s =
      ReceiveWithFd(sv[0], 256, &message, &fd, absl::Now() + absl::Milliseconds(500));
  const int at_return = sent.load();
  stop.store(true);
  dripper.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_LT(at_return, 100);
  EXPECT_EQ(fd, -1);
  close(sv[0]);
  close(sv[1]);
}

TEST(FdPassing, DescriptorAndMessageCrossASocketPair) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  const std::string dir = TempDir();
  std::ofstream(dir + "/f") << "payload";
  int fd = open((dir + "/f").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendWithFd(pair[0], "OK\n", fd).ok());
  close(fd);
  std::string msg;
  int got = -1;
  ASSERT_TRUE(ReceiveWithFd(pair[1], 64, &msg, &got).ok());
  EXPECT_EQ(msg, "OK");
  ASSERT_GE(got, 0);
  char buf[8] = {};
  EXPECT_EQ(read(got, buf, 7), 7);
  EXPECT_STREQ(buf, "payload");
  close(got);
  // No newline within the limit: an error, and no descriptor leaks out.
  ASSERT_TRUE(SendWithFd(pair[0], std::string(100, 'x'), -1).ok());
  EXPECT_EQ(ReceiveWithFd(pair[1], 64, &msg, &got).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(got, -1);
  close(pair[0]);
  close(pair[1]);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stoker::shm
