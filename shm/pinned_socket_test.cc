// PinnedSocket: once pinned, a connection reaches the folder that was
// opened even after its path is made to name another (the swap a parent
// folder's owner could make between a check and a connection), the server
// check is of that folder and names the path as the user named it, a
// symlink is never pinned, and the folder's descriptor goes with it.
#include "shm/pinned_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "shm/fd_passing.h"

namespace stoker::shm {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/stoker-pin-XXXXXX";
  return mkdtemp(tmpl);
}

// A listening socket at `path`.
int Listen(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << path;
  EXPECT_EQ(listen(fd, 4), 0);
  return fd;
}

// Whether `listener` has a connection waiting (one was made before).
bool Waiting(int listener) {
  pollfd p{listener, POLLIN, 0};
  return poll(&p, 1, 0) == 1;
}

TEST(PinnedSocket, ConnectionsReachTheFolderThatWasPinned) {
  const std::string dir = TempDir();
  ASSERT_EQ(mkdir((dir + "/run").c_str(), 0700), 0);
  const int checked = Listen(dir + "/run/s.sock");
  absl::StatusOr<std::shared_ptr<const PinnedSocket>> at = PinnedSocket::Pin(dir + "/run/s.sock");
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_EQ((*at)->path(), dir + "/run/s.sock");
  ASSERT_EQ((*at)->pinned().rfind("/proc/self/fd/", 0), 0u) << (*at)->pinned();
  EXPECT_TRUE((*at)->Current());
  // The folder is swapped for another with a server of its own.
  ASSERT_EQ(rename((dir + "/run").c_str(), (dir + "/old").c_str()), 0);
  ASSERT_EQ(mkdir((dir + "/run").c_str(), 0700), 0);
  const int swapped = Listen(dir + "/run/s.sock");
  EXPECT_FALSE((*at)->Current());  // A fresh pin would reach the new one.
  absl::StatusOr<int> sock = ConnectUnix((*at)->pinned(), absl::Seconds(5));
  ASSERT_TRUE(sock.ok()) << sock.status();
  EXPECT_TRUE(Waiting(checked));
  EXPECT_FALSE(Waiting(swapped));
  // The server check is of the pinned folder and names the path as named.
  EXPECT_TRUE(VerifyServer(*sock, **at).ok()) << VerifyServer(*sock, **at);
  ASSERT_EQ(chmod((dir + "/old").c_str(), 0777), 0);
  absl::Status s = VerifyServer(*sock, **at);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find(dir + "/run/s.sock"), std::string::npos) << s;
  EXPECT_EQ(s.message().find("/proc/self"), std::string::npos) << s;
  close(*sock);
  const int fd = (*at)->folder_fd();
  at->reset();
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);  // Closed with it.
  close(checked);
  close(swapped);
  std::filesystem::remove_all(dir);
}

TEST(PinnedSocket, ASymlinkOrAMissingFolderIsNotPinned) {
  const std::string dir = TempDir();
  ASSERT_EQ(mkdir((dir + "/real").c_str(), 0700), 0);
  std::filesystem::create_directory_symlink(dir + "/real", dir + "/link");
  for (const std::string& via : {dir + "/link/s.sock", dir + "/link/./s.sock",
                                 dir + "/link//s.sock", dir + "/real/link/../s.sock",
                                 std::string("/proc/self/cwd/s.sock")}) {
    EXPECT_EQ(PinnedSocket::Pin(via).status().code(), absl::StatusCode::kFailedPrecondition)
        << via;
  }
  // Not there (yet): a daemon to wait for, as when nothing answers.
  absl::Status missing = PinnedSocket::Pin(dir + "/gone/s.sock").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kUnavailable) << missing;
  EXPECT_NE(missing.message().find(dir + "/gone/s.sock"), std::string::npos) << missing;
  absl::StatusOr<std::shared_ptr<const PinnedSocket>> here = PinnedSocket::Pin("s.sock");
  ASSERT_TRUE(here.ok()) << here.status();  // The working folder's.
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stoker::shm
