// Daemon::Stop while a client does not answer: every wait on a client's
// opener ends at once, cancelled, rather than at its timeout.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/daemon/daemon.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

// A session opening a folder through a client's opener that takes every
// request and never answers: the stop cancels it, and the opening ends
// with the stop's word, not the opener's 30 s timeout.
TEST(DaemonStopTest, AnOpenerThatNeverAnswersIsCancelledByTheStop) {
  const std::string root = testdata::MakeTempDir("stop");
  testdata::FolderSpec spec;
  spec.classes = 1;
  spec.per_class = 2;
  ASSERT_TRUE(testdata::MakeFolderDataset(root + "/data", spec).ok());
  DaemonOptions o;
  o.decode_threads = 1;
  o.shm_prefix = absl::StrCat("stoker-ds", getpid(), ".");
  o.handoff_socket = root + "/ring.sock";
  Daemon d(o);
  ASSERT_TRUE(d.Start().ok());
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
  const int folder = open((root + "/data").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(folder, 0);
  const Caller alice = Caller::User(7201, false);
  v1::OpenSessionRequest r;
  r.mutable_spec()->mutable_dataset()->mutable_folder()->set_path(root + "/data");
  r.mutable_spec()->mutable_dataset()->set_root_token(
      d.authorizer().RegisterRoot(folder, pair[0], 7201));
  r.mutable_spec()->set_batch_size(3);
  r.mutable_spec()->set_transform(v1::TRANSFORM_VAL);
  r.mutable_spec()->set_image_size(16);

  absl::StatusOr<v1::OpenSessionResponse> opened;
  std::thread opening([&] { opened = d.OpenSession(r, alice); });
  // The daemon asks the client's opener (its listing of the folder) ...
  struct timeval wait {60, 0};
  setsockopt(pair[1], SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
  char request[4096];
  const ssize_t asked = recv(pair[1], request, sizeof(request), 0);
  // ... which never answers; the daemon stops.
  d.Stop();
  opening.join();
  ASSERT_GT(asked, 0);
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kCancelled) << opened.status();
  EXPECT_TRUE(absl::StrContains(opened.status().message(), "the daemon is stopping"))
      << opened.status();
  close(pair[1]);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace stoker
