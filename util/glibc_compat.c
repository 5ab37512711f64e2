/* Functions newer than glibc 2.28 that Debian 12's static archives call,
 * for the shipped files, which link against glibc 2.28's stubs
 * (third_party/shipped.bzl). Each is defined hidden, so it binds inside
 * the file that links it and never takes the place of the host's glibc.
 *
 * - __libc_single_threaded (2.32): libstdc++'s inline reference counts
 *   skip their atomics while it is non-zero. Here it stays 0: always atomic.
 * - arc4random, arc4random_buf, arc4random_uniform (2.36): libstdc++'s
 *   std::random_device. They read getrandom(2) (2.25), blocking only until
 *   the kernel's pool is first seeded, and abort without any source, as
 *   glibc's do.
 * - gettid (2.30): libhdf5's thread ids, from the system call.
 * - the stat family (2.33; before, inline wrappers of libc_nonshared.a):
 *   over __xstat, __fxstat, __lxstat and __fxstatat, which every glibc has
 *   had since 2.4 and keeps, so errno is glibc's own.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define STOKER_COMPAT __attribute__((visibility("hidden")))

STOKER_COMPAT char __libc_single_threaded = 0;

STOKER_COMPAT void arc4random_buf(void* out, size_t n) {
  char* p = out;
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom(p + got, n - got, 0);
    if (r > 0) {
      got += (size_t)r;
    } else if (r < 0 && errno != EINTR) {
      abort(); /* No entropy source at all. */
    }
  }
}

STOKER_COMPAT uint32_t arc4random(void) {
  uint32_t v;
  arc4random_buf(&v, sizeof(v));
  return v;
}

/* Uniform in [0, bound) without modulo bias: values below 2^32 % bound
 * are drawn again. */
STOKER_COMPAT uint32_t arc4random_uniform(uint32_t bound) {
  if (bound < 2) return 0;
  const uint32_t floor = (uint32_t)(-bound) % bound;
  for (;;) {
    uint32_t v = arc4random();
    if (v >= floor) return v % bound;
  }
}

STOKER_COMPAT pid_t gettid(void) { return (pid_t)syscall(SYS_gettid); }

/* glibc 2.28's entry points of the stat family; version 1 is x86-64's
 * struct stat, the one <sys/stat.h> declares. */
enum { kStatVersion = 1 };
extern int __xstat(int version, const char* path, struct stat* out);
extern int __fxstat(int version, int fd, struct stat* out);
extern int __lxstat(int version, const char* path, struct stat* out);
extern int __fxstatat(int version, int dirfd, const char* path, struct stat* out, int flags);

STOKER_COMPAT int stat(const char* path, struct stat* out) {
  return __xstat(kStatVersion, path, out);
}
STOKER_COMPAT int fstat(int fd, struct stat* out) { return __fxstat(kStatVersion, fd, out); }
STOKER_COMPAT int lstat(const char* path, struct stat* out) {
  return __lxstat(kStatVersion, path, out);
}
STOKER_COMPAT int fstatat(int dirfd, const char* path, struct stat* out, int flags) {
  return __fxstatat(kStatVersion, dirfd, path, out, flags);
}
/* On x86-64, struct stat64 is struct stat. */
STOKER_COMPAT int stat64(const char* path, struct stat64* out) {
  return __xstat(kStatVersion, path, (struct stat*)out);
}
STOKER_COMPAT int fstat64(int fd, struct stat64* out) {
  return __fxstat(kStatVersion, fd, (struct stat*)out);
}
STOKER_COMPAT int lstat64(const char* path, struct stat64* out) {
  return __lxstat(kStatVersion, path, (struct stat*)out);
}
STOKER_COMPAT int fstatat64(int dirfd, const char* path, struct stat64* out, int flags) {
  return __fxstatat(kStatVersion, dirfd, path, (struct stat*)out, flags);
}
