// Cross-process wait/wake on a 32-bit word in shared memory (Linux futex,
// shared variant: never FUTEX_PRIVATE_FLAG, since waiter and waker are
// different processes). Stateless and thread-safe.
#ifndef STOKER_SHM_FUTEX_H_
#define STOKER_SHM_FUTEX_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace stoker::shm {

// Blocks while *word == expected, for at most `timeout` (InfiniteDuration
// for no limit). Returns early on a wake, a signal, or when *word already
// differs; callers re-check their condition in a loop.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected,
               absl::Duration timeout);

// Wakes every waiter on `word`.
void FutexWakeAll(std::atomic<uint32_t>* word);

// CLOCK_MONOTONIC in nanoseconds; comparable across processes on one host.
uint64_t MonotonicNanos();

}  // namespace stoker::shm

#endif  // STOKER_SHM_FUTEX_H_
