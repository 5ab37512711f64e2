// Functions newer than glibc 2.28 that Debian 12's static archives call,
// for the shipped files, which link against glibc 2.28's stubs
// (third_party/shipped.bzl). Each is defined hidden, so it binds inside
// the file that links it and never takes the place of the host's glibc.
//
// - __libc_single_threaded (2.32): libstdc++'s inline reference counts
//   skip their atomics while it is non-zero. Here it stays 0: always atomic.
// - arc4random, arc4random_buf, arc4random_uniform (2.36): libstdc++'s
//   std::random_device. They read getrandom(2) (2.25), blocking only until
//   the kernel's pool is first seeded, and abort without any source, as
//   glibc's do.
// - gettid (2.30): libhdf5's thread ids, from the system call.
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#define STOKER_COMPAT extern "C" __attribute__((visibility("hidden")))

extern "C" {
__attribute__((visibility("hidden"))) char __libc_single_threaded = 0;
}

STOKER_COMPAT void arc4random_buf(void* out, size_t n) {
  char* p = static_cast<char*>(out);
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom(p + got, n - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r < 0 && errno != EINTR) {
      std::abort();  // No entropy source at all.
    }
  }
}

STOKER_COMPAT uint32_t arc4random(void) {
  uint32_t v;
  arc4random_buf(&v, sizeof(v));
  return v;
}

// Uniform in [0, bound) without modulo bias: values below 2^32 % bound
// are drawn again.
STOKER_COMPAT uint32_t arc4random_uniform(uint32_t bound) {
  if (bound < 2) return 0;
  const uint32_t floor = static_cast<uint32_t>(-bound) % bound;
  for (;;) {
    uint32_t v = arc4random();
    if (v >= floor) return v % bound;
  }
}

STOKER_COMPAT pid_t gettid(void) { return static_cast<pid_t>(syscall(SYS_gettid)); }
