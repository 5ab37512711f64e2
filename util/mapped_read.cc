#include "util/mapped_read.h"

#include <setjmp.h>
#include <signal.h>

#include <mutex>

#include "absl/strings/str_cat.h"

namespace stoker {
namespace {

// The armed read of this thread, if any.
thread_local sigjmp_buf* armed = nullptr;

void OnSigbus(int, siginfo_t*, void*) {
  if (sigjmp_buf* jump = armed) {
    armed = nullptr;
    siglongjmp(*jump, 1);
  }
  // Not a guarded read: the default action (SIGBUS is blocked here, so the
  // raised one is taken, by default, as the handler returns).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGBUS, &dfl, nullptr);
  raise(SIGBUS);
}

void Install() {
  struct sigaction sa {};
  sa.sa_sigaction = OnSigbus;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, nullptr);
}

}  // namespace

absl::Status GuardedMappedRead(absl::string_view what, void (*read)(void*), void* arg) {
  static std::once_flag once;
  std::call_once(once, Install);
  sigjmp_buf jump;
  // savemask: the handler's blocked SIGBUS is unblocked again on the jump.
  if (sigsetjmp(jump, 1) != 0) {
    return absl::DataLossError(
        absl::StrCat(what, ": the file shrank while it was being read"));
  }
  armed = &jump;
  read(arg);
  armed = nullptr;
  return absl::OkStatus();
}

}  // namespace stoker
