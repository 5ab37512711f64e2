#include "server/daemon/owners.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

// A pid that existed and is gone: a child that exited and was reaped.
int DeadPid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  return child;
}

void Touch(const std::filesystem::path& p) { std::ofstream(p) << ""; }

TEST(OwnersTest, APidAloneIsAliveUntilItExits) {
  EXPECT_TRUE(OwnersAlive(getpid(), ""));
  EXPECT_FALSE(OwnersAlive(DeadPid(), ""));
  EXPECT_FALSE(OwnersAlive(0, ""));
}

TEST(OwnersTest, TheFolderKeepsLiveOwnersAndDropsDeadOnes) {
  const std::filesystem::path dir = testdata::MakeTempDir("owners");
  const std::filesystem::path dead = dir / std::to_string(DeadPid());
  const std::filesystem::path live = dir / std::to_string(getpid());
  Touch(dead);
  Touch(dir / "not-a-pid");
  EXPECT_FALSE(OwnersAlive(0, dir.string()));
  EXPECT_FALSE(std::filesystem::exists(dead));            // Removed.
  EXPECT_TRUE(std::filesystem::exists(dir / "not-a-pid"));  // Left alone.
  Touch(live);
  EXPECT_TRUE(OwnersAlive(0, dir.string()));
  EXPECT_TRUE(std::filesystem::exists(live));
  EXPECT_FALSE(OwnersAlive(0, (dir / "missing").string()));
}

}  // namespace
}  // namespace stoker
