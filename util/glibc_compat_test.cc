// The shims of util/glibc_compat.cc, linked into this test as into the
// shipped files: calls from this file bind to them, not to glibc's.
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <set>

#include "gtest/gtest.h"

extern "C" {
extern char __libc_single_threaded;
uint32_t arc4random(void);
void arc4random_buf(void* out, size_t n);
uint32_t arc4random_uniform(uint32_t bound);
pid_t gettid(void);
}

namespace {

TEST(GlibcCompat, LibstdcxxAlwaysUsesAtomics) { EXPECT_EQ(__libc_single_threaded, 0); }

TEST(GlibcCompat, RandomBytesFillTheWholeBuffer) {
  // 4 KiB of zeros from a working source: a chance of 2^-32768.
  unsigned char buf[4096];
  std::memset(buf, 0, sizeof(buf));
  arc4random_buf(buf, sizeof(buf));
  int zeros_at_end = 0;
  for (int i = 4095; i >= 4064; --i) zeros_at_end += buf[i] == 0;
  EXPECT_LT(zeros_at_end, 32);
  std::set<uint32_t> seen;
  for (int i = 0; i < 64; ++i) seen.insert(arc4random());
  EXPECT_GT(seen.size(), 60u);
}

TEST(GlibcCompat, UniformStaysBelowItsBoundAndReachesEveryValue) {
  EXPECT_EQ(arc4random_uniform(0), 0u);
  EXPECT_EQ(arc4random_uniform(1), 0u);
  std::set<uint32_t> seen;
  for (int i = 0; i < 2000; ++i) {
    uint32_t v = arc4random_uniform(7);
    ASSERT_LT(v, 7u);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 7u);
  for (int i = 0; i < 1000; ++i) ASSERT_LT(arc4random_uniform(0x80000001u), 0x80000001u);
}

TEST(GlibcCompat, GettidIsTheKernelsThreadId) {
  EXPECT_EQ(gettid(), static_cast<pid_t>(syscall(SYS_gettid)));
}

}  // namespace
