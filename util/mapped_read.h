// Reads from file mappings whose file someone else may truncate at any time
// (a trainer's own .npy, HDF5 or LMDB file). Touching a mapped page past the
// file's new end raises SIGBUS, which would end the daemon and every session
// in it; GuardedMappedRead runs the read with a SIGBUS handler armed for the
// calling thread and turns the fault into DATA_LOSS for that read alone.
//
// Thread-safe. The handler is installed once per process; a SIGBUS outside
// an armed read takes the default action (the process ends, as before).
// The read must hold nothing that needs a destructor across the copy (the
// fault leaves it through siglongjmp): plain loops over pointers, memory
// allocated before the call.
#ifndef STOKER_UTIL_MAPPED_READ_H_
#define STOKER_UTIL_MAPPED_READ_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace stoker {

absl::Status GuardedMappedRead(absl::string_view what, void (*read)(void*), void* arg);

// The same for a callable (a lambda); `fn` lives in the caller's frame.
template <typename Fn>
absl::Status GuardedMappedRead(absl::string_view what, Fn& fn) {
  return GuardedMappedRead(what, [](void* f) { (*static_cast<Fn*>(f))(); }, &fn);
}

}  // namespace stoker

#endif  // STOKER_UTIL_MAPPED_READ_H_
