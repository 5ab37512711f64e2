// RAM that array sources hold (RAM copies of .npy/HDF5 files, datasets read
// whole), charged to the user whose session opened them: at most
// `per_user` bytes for one uid and `total` for all together, so one user's
// sessions cannot take the node's memory (or wake the OOM killer). A
// refused charge is no error: the source reads from its mapping, or per
// sample, instead.
//
// Thread-safe. A token gives its bytes back when the last copy of it is
// dropped, which may be after the budget itself is gone.
#ifndef STOKER_SERVER_ACCESS_MEMORY_BUDGET_H_
#define STOKER_SERVER_ACCESS_MEMORY_BUDGET_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "util/cancellation.h"

namespace stoker {

class MemoryBudget {
 public:
  // `per_user` 0: only the total limits a user.
  MemoryBudget(uint64_t total, uint64_t per_user);

  // A token holding `bytes` for `uid` (-1: an admin or in-process caller,
  // bound only by the total), or null when either budget has no room.
  std::shared_ptr<void> Charge(int64_t uid, uint64_t bytes);
  // The same for memory held by work in flight (which ends): waits for
  // tokens to be given back until both budgets have room. One request of a
  // uid that holds nothing may pass its per-user bound (so a large piece
  // of work is never refused, only run alone); null at once when `bytes`
  // is over the total, after `timeout` without room, and as soon as
  // `cancel` (may be null) is raised. Waits take room in their order of
  // arrival, except that one its own user's share holds back holds back
  // only that user's later waits: a large request is never passed forever
  // by smaller ones, its own user's or others'.
  std::shared_ptr<void> Wait(int64_t uid, uint64_t bytes, absl::Duration timeout,
                             const Cancellation* cancel = nullptr);
  // Wait, its refusals in words for `what` (a file, or a decode of one):
  // CANCELLED "<what>: its session closed" when `cancel` was raised, else
  // RESOURCE_EXHAUSTED naming `what`, `bytes` and `flag` (the operator's
  // flag that sets this budget).
  absl::StatusOr<std::shared_ptr<void>> WaitNamed(int64_t uid, uint64_t bytes,
                                                  absl::Duration timeout,
                                                  const Cancellation* cancel,
                                                  absl::string_view what,
                                                  absl::string_view flag);
  uint64_t used() const;
  uint64_t total() const;
  int waiting() const;  // Waits in progress (tests).
  uint64_t used_by(int64_t uid) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace stoker

#endif  // STOKER_SERVER_ACCESS_MEMORY_BUDGET_H_
