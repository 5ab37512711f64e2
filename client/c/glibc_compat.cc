// Two shims that let libstoker.so, which carries Debian's static archives,
// load into any process on glibc 2.34 or newer.
//
// stderr: the archives are compiled as PIE, which reads `stderr` through a
// PC-relative reference (expecting a copy relocation in the executable); a
// shared library cannot resolve that against glibc. The link renames those
// references (-Wl,--wrap=stderr) to a hidden variable set to glibc's stream
// before any other constructor of the library runs.
//
// arc4random: libstdc++.a of GCC 12 on glibc 2.36 seeds std::random_device
// with arc4random (new in glibc 2.36). The link renames it
// (-Wl,--wrap=arc4random) to getrandom(2), which glibc has had since 2.25.
#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" {
extern FILE* __real_stderr;
__attribute__((visibility("hidden"))) FILE* __wrap_stderr = nullptr;

__attribute__((visibility("hidden"))) uint32_t __wrap_arc4random(void) {
  uint32_t v = 0;
  char* p = reinterpret_cast<char*>(&v);
  size_t got = 0;
  while (got < sizeof(v)) {
    ssize_t n = getrandom(p + got, sizeof(v) - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      std::abort();  // No entropy source at all: as arc4random would.
    }
  }
  return v;
}
}  // extern "C"

namespace {
__attribute__((constructor(101))) void InitWrappedStderr() {
  __wrap_stderr = __real_stderr;
}
}  // namespace
