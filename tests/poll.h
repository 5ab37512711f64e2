// Waiting in a test for what another thread does: `done` is polled
// `every` interval until it holds, for at most `limit`. Its answer is what the
// test asserts, so a regression fails there instead of hanging until the
// test runner's timeout; a correct run waits only as long as the event
// takes, however slow the machine.
#ifndef STOKER_TESTS_POLL_H_
#define STOKER_TESTS_POLL_H_

#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace stoker::testing {

inline bool PollUntil(const std::function<bool()>& done,
                      absl::Duration limit = absl::Seconds(60),
                      absl::Duration every = absl::Milliseconds(1)) {
  const absl::Time until = absl::Now() + limit;
  while (!done()) {
    if (absl::Now() > until) return false;
    absl::SleepFor(every);
  }
  return true;
}

}  // namespace stoker::testing

#endif  // STOKER_TESTS_POLL_H_
