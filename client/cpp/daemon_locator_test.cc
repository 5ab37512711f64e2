#include "client/cpp/daemon_locator.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

struct World {
  std::map<std::string, std::string> env;
  std::set<std::string> answering;
  absl::StatusOr<DaemonLocation> Locate() const {
    return LocateDaemon(
        [this](const char* name) -> const char* {
          auto it = env.find(name);
          return it == env.end() ? nullptr : it->second.c_str();
        },
        [this](const std::string& path) { return answering.count(path) > 0; }, 1234);
  }
};

TEST(DaemonLocatorTest, TheNodesDaemonElseThisUsersEmbeddedOne) {
  World w;
  absl::StatusOr<DaemonLocation> at = w.Locate();
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_TRUE(at->embedded);
  EXPECT_EQ(at->socket, "/tmp/stoker-embedded-1234/stoker.sock");
  EXPECT_EQ(at->log, "/tmp/stoker-embedded-1234/stokerd.log");
  EXPECT_NE(at->Describe().find("embedded daemon at /tmp/stoker-embedded-1234/stoker.sock"),
            std::string::npos);
  w.env["STOKER_EMBEDDED_DIR"] = "/scratch/emb";
  EXPECT_EQ(w.Locate()->socket, "/scratch/emb/stoker.sock");
  w.answering.insert(kNodeSocket);
  at = w.Locate();
  EXPECT_FALSE(at->embedded);
  EXPECT_EQ(at->socket, kNodeSocket);
  // "embedded" passes over a node daemon that answers.
  w.env["STOKER_SOCKET"] = "embedded";
  at = w.Locate();
  EXPECT_TRUE(at->embedded);
  EXPECT_EQ(at->socket, "/scratch/emb/stoker.sock");
}

TEST(DaemonLocatorTest, ANamedSocketMustAnswer) {
  World w;
  w.answering.insert(kNodeSocket);
  w.env["STOKER_SOCKET"] = "/jobs/7/stoker.sock";
  absl::StatusOr<DaemonLocation> at = w.Locate();
  EXPECT_EQ(at.status().code(), absl::StatusCode::kUnavailable) << at.status();
  EXPECT_NE(at.status().message().find("/jobs/7/stoker.sock"), std::string::npos);
  EXPECT_NE(at.status().message().find("STOKER_SOCKET=embedded"), std::string::npos);
  w.answering.insert("/jobs/7/stoker.sock");
  at = w.Locate();
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_EQ(at->socket, "/jobs/7/stoker.sock");
  EXPECT_FALSE(at->embedded);
}

TEST(DaemonLocatorTest, SocketAnswersOnlyWhereSomethingListens) {
  char folder[] = "/tmp/locator-XXXXXX";
  ASSERT_NE(mkdtemp(folder), nullptr);
  const std::string path = absl::StrCat(folder, "/s.sock");
  EXPECT_FALSE(SocketAnswers(path));  // No file.
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_FALSE(SocketAnswers(path));  // Bound, not listening.
  ASSERT_EQ(listen(fd, 4), 0);
  EXPECT_TRUE(SocketAnswers(path));
  close(fd);
  EXPECT_FALSE(SocketAnswers(path));  // Closed: its file stays, nothing answers.
  EXPECT_FALSE(SocketAnswers(std::string(200, 'x')));  // Too long for a socket.
  unlink(path.c_str());
  rmdir(folder);
}

}  // namespace
}  // namespace stoker
