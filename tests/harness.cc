#include "tests/harness.h"

#include <signal.h>
#include <sys/stat.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "shm/fd_passing.h"
#include "shm/segment.h"
#include "tests/testdata.h"

extern char** environ;

namespace stoker::testing {

const v1::TierStats& TierOf(const v1::DaemonStats& stats, const std::string& name) {
  for (const auto& t : stats.tiers()) {
    if (t.tier() == name) return t;
  }
  return v1::TierStats::default_instance();
}


pid_t Spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  EXPECT_EQ(rc, 0) << "spawn " << args[0];
  return pid;
}

int WaitExit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TestDaemon::TestDaemon(bool subprocess, int threads)
    : TestDaemon(subprocess, [threads] {
        DaemonOptions o;
        o.decode_threads = threads;
        return o;
      }()) {}

TestDaemon::TestDaemon(bool subprocess, DaemonOptions options, const std::string& dir)
    : subprocess_(subprocess) {
  static int counter = 0;
  dir_ = dir.empty() ? testdata::MakeTempDir("td") : dir;
  if (!dir.empty()) mkdir(dir.c_str(), 0700);
  socket_ = dir_ + "/s.sock";
  prefix_ = absl::StrCat("stoker-td", getpid(), "-", counter++, ".");
  if (subprocess) {
    pid_ = Spawn({"server/stokerd", "--socket", socket_, "--threads",
                  std::to_string(options.decode_threads), "--shm-prefix",
                  prefix_, "--metrics-address", "127.0.0.1:0",
                  // Tests read its /proc/<pid>/maps and fd (Segment::List),
                  // which a non-dumpable process hides from its own user.
                  "--allow-root", "--allow-core-dumps"});
    return;
  }
  options.shm_prefix = prefix_;
  // As stokerd: the ring socket beside the control socket, opened first.
  options.handoff_socket = shm::RingSocketPath(socket_);
  daemon_ = std::make_unique<Daemon>(options);
  absl::Status s = daemon_->Start();
  EXPECT_TRUE(s.ok()) << s;
  auto handoff = RingHandoffServer::Start(daemon_.get(), options.handoff_socket, 0600);
  EXPECT_TRUE(handoff.ok()) << handoff.status();
  if (handoff.ok()) handoff_ = *std::move(handoff);
  auto server = GrpcServer::Start(daemon_.get(), socket_);
  EXPECT_TRUE(server.ok()) << server.status();
  if (server.ok()) server_ = *std::move(server);
}

TestDaemon::~TestDaemon() {
  if (subprocess_) {
    kill(pid_, SIGTERM);
    EXPECT_EQ(WaitExit(pid_), 0) << "stokerd did not exit cleanly";
    EXPECT_FALSE(std::filesystem::exists(socket_)) << "socket file left behind";
  } else {
    daemon_->Stop();
    if (server_) server_->Shutdown();
    if (handoff_) handoff_->Shutdown();
    daemon_.reset();
  }
  // A subprocess's rings went with it; this process must hold none.
  EXPECT_TRUE(shm::Segment::List(prefix_).empty()) << "ring left mapped or open";
  std::filesystem::remove_all(dir_);
}

std::unique_ptr<Client> TestDaemon::Connect() {
  auto c = Client::Connect(socket_, absl::Seconds(20));
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

}  // namespace stoker::testing
