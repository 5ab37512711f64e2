// Lets libstoker.so, which carries Debian's static archives, reach stderr.
// The archives are compiled as PIE, which reads `stderr` through a
// PC-relative reference (expecting a copy relocation in the executable); a
// shared library cannot resolve that against glibc. The link renames those
// references (-Wl,--wrap=stderr) to a hidden variable set to glibc's stream
// before any other constructor of the library runs.
#include <cstdio>

extern "C" {
extern FILE* __real_stderr;
__attribute__((visibility("hidden"))) FILE* __wrap_stderr = nullptr;
}  // extern "C"

namespace {
__attribute__((constructor(101))) void InitWrappedStderr() {
  __wrap_stderr = __real_stderr;
}
}  // namespace
