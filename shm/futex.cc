#include "shm/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace stoker::shm {

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected,
               absl::Duration timeout) {
  struct timespec ts;
  struct timespec* tsp = nullptr;
  if (timeout != absl::InfiniteDuration()) {
    if (timeout < absl::ZeroDuration()) timeout = absl::ZeroDuration();
    ts = absl::ToTimespec(timeout);
    tsp = &ts;
  }
  // std::atomic<uint32_t> is layout-compatible with uint32_t (asserted in
  // ring_data.h), which is what the kernel compares against `expected`.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected,
          tsp, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX,
          nullptr, nullptr, 0);
}

uint64_t MonotonicNanos() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL +
         static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace stoker::shm
