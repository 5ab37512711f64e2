#include "util/mapped_read.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace stoker {
namespace {

// A file mapped, then truncated by its owner: the guarded read of a page
// past the new end is DATA_LOSS, the process goes on, and so do reads of
// what is still there, on this and other threads.
TEST(MappedReadTest, ReadPastATruncatedEndIsDataLoss) {
  char path[] = "/tmp/stoker-mapped-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const std::string bytes(4 * page, 'x');
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  void* map = mmap(nullptr, bytes.size(), PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(map, MAP_FAILED);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(page)), 0);
  const auto* src = static_cast<const char*>(map);
  char out[64];
  auto tail = [&] { std::memcpy(out, src + 3 * page, sizeof(out)); };
  for (int i = 0; i < 3; ++i) {  // The handler stays armed for the next.
    absl::Status s = GuardedMappedRead("x.npy", tail);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_EQ(s.message(), "x.npy: the file shrank while it was being read");
  }
  auto head = [&] { std::memcpy(out, src, sizeof(out)); };
  EXPECT_TRUE(GuardedMappedRead("x.npy", head).ok());
  EXPECT_EQ(out[0], 'x');
  absl::Status other;
  std::thread t([&] { other = GuardedMappedRead("y.npy", tail); });
  t.join();
  EXPECT_EQ(other.code(), absl::StatusCode::kDataLoss);
  munmap(map, bytes.size());
  close(fd);
  unlink(path);
}

// Outside a guarded read, SIGBUS still ends the process.
TEST(MappedReadDeathTest, UnguardedFaultStillEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto nothing = [] {};
  EXPECT_TRUE(GuardedMappedRead("install", nothing).ok());
  EXPECT_EXIT(raise(SIGBUS), ::testing::KilledBySignal(SIGBUS), "");
}

}  // namespace
}  // namespace stoker
