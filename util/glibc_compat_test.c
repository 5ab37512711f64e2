/* The shims of util/glibc_compat.c, linked as the shipped files link them
 * (against glibc 2.28's stubs, third_party/shipped.bzl) and run on this
 * host's glibc. Exits non-zero, saying which check failed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char __libc_single_threaded;
uint32_t arc4random(void);
void arc4random_buf(void* out, size_t n);
uint32_t arc4random_uniform(uint32_t bound);
pid_t gettid(void);

static int failures = 0;
#define CHECK(cond)                                              \
  do {                                                           \
    if (!(cond)) {                                               \
      fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                \
    }                                                            \
  } while (0)

int main(void) {
  struct stat st, want;
  struct stat64 st64;
  CHECK(__libc_single_threaded == 0); /* libstdc++'s counts stay atomic. */
  /* A failure sets glibc's own errno (each call starts from another). */
#define CHECK_FAILS_WITH(call, code) \
  do {                               \
    errno = 0;                       \
    CHECK((call) == -1 && errno == (code)); \
  } while (0)
  CHECK_FAILS_WITH(stat("/nonexistent/stoker", &st), ENOENT);
  CHECK_FAILS_WITH(lstat("/nonexistent/stoker", &st), ENOENT);
  CHECK_FAILS_WITH(fstat(-1, &st), EBADF);
  CHECK_FAILS_WITH(fstatat(AT_FDCWD, "", &st, 0), ENOENT);
  CHECK_FAILS_WITH(stat64("/nonexistent/stoker", &st64), ENOENT);
  CHECK_FAILS_WITH(lstat64("/nonexistent/stoker", &st64), ENOENT);
  CHECK_FAILS_WITH(fstat64(-1, &st64), EBADF);
  CHECK_FAILS_WITH(fstatat64(-1, "relative", &st64, 0), EBADF);
  /* And success fills the struct as the kernel says. */
  CHECK(stat("/proc/self/exe", &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0);
  CHECK(lstat("/proc/self/exe", &st) == 0 && S_ISLNK(st.st_mode));
  /* The flags reach the kernel: a symbolic link itself, or what it names. */
  CHECK(fstatat(AT_FDCWD, "/proc/self/exe", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st.st_mode));
  CHECK(fstatat(AT_FDCWD, "/proc/self/exe", &st, 0) == 0 && S_ISREG(st.st_mode));
  CHECK(fstatat64(AT_FDCWD, "/proc/self/exe", &st64, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st64.st_mode));
  /* The same fields as the system call gives. */
  CHECK(syscall(SYS_newfstatat, AT_FDCWD, "/proc/self/exe", &want, 0) == 0);
  CHECK(stat("/proc/self/exe", &st) == 0 && st.st_ino == want.st_ino &&
        st.st_size == want.st_size && st.st_dev == want.st_dev);
  CHECK(stat64("/proc/self/exe", &st64) == 0 && st64.st_ino == want.st_ino &&
        st64.st_size == want.st_size);
  int fd = open("/proc/self/exe", O_RDONLY);
  CHECK(fd >= 0 && fstat64(fd, &st64) == 0 && S_ISREG(st64.st_mode));
  CHECK(lstat64("/proc/self/exe", &st64) == 0 && S_ISLNK(st64.st_mode));
  CHECK(fstatat64(AT_FDCWD, "/proc/self/exe", &st64, 0) == 0 && S_ISREG(st64.st_mode));
  close(fd);

  CHECK(gettid() == (pid_t)syscall(SYS_gettid));

  unsigned char buf[4096];
  memset(buf, 0, sizeof(buf));
  arc4random_buf(buf, sizeof(buf));
  int zeros = 0;
  for (int i = sizeof(buf) - 32; i < (int)sizeof(buf); ++i) zeros += buf[i] == 0;
  CHECK(zeros < 32); /* The whole buffer is filled: all zero is 2^-256. */
  uint32_t draws[64];
  int distinct = 0;
  for (int i = 0; i < 64; ++i) {
    draws[i] = arc4random();
    int seen_before = 0;
    for (int j = 0; j < i; ++j) seen_before |= draws[j] == draws[i];
    distinct += !seen_before;
  }
  CHECK(distinct > 60);
  CHECK(arc4random_uniform(0) == 0 && arc4random_uniform(1) == 0);
  int seen[7] = {0};
  for (int i = 0; i < 2000; ++i) {
    uint32_t v = arc4random_uniform(7);
    CHECK(v < 7);
    if (v < 7) seen[v] = 1;
  }
  for (int i = 0; i < 7; ++i) CHECK(seen[i]);
  for (int i = 0; i < 1000; ++i) CHECK(arc4random_uniform(0x80000001u) < 0x80000001u);

  if (failures == 0) printf("glibc_compat_test: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
