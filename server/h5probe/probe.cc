// stoker-h5probe: the HDF5 reader. stokerd starts one per HDF5 source it
// opens and hands it each file of that source, one at a time, on fd 3 (a
// stream socket; server/h5probe/protocol.h); it answers with where each
// dataset's bytes are, and stokerd reads them itself.
//
// libhdf5 parses a trainer's file here, never in the shared daemon, and
// before it parses anything the reader is shut in:
//   - every descriptor but 0-3 is closed (0-2 are /dev/null); a root reader
//     becomes nobody; it dies with the daemon;
//   - no new privileges, not dumpable; no files may be written or created,
//     at most 8 descriptors held; outside sanitizer builds, 2 GiB of address
//     space;
//   - a seccomp allow-list: reading and closing the descriptors it is given,
//     talking on fd 3, memory without execute, signalling only itself, and
//     leaving. Anything else
//     (open, exec, socket, ptrace, ...) kills the reader, and stokerd reports
//     that file's error.
// A file that crashes or hangs it costs that file; stokerd starts another
// reader for the next one.
#include <grp.h>
#include <signal.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "server/h5probe/describe.h"
#include "server/h5probe/protocol.h"

namespace stoker {
namespace h5probe {
namespace {

constexpr int kSocket = 3;

bool Limit(int resource, rlim_t most) {
  const struct rlimit r {most, most};
  return setrlimit(resource, &r) == 0;
}

bool DropPrivileges() {
  if (syscall(SYS_close_range, 4u, ~0u, 0) != 0) {  // Before Linux 5.9.
    struct rlimit most {};
    getrlimit(RLIMIT_NOFILE, &most);
    for (rlim_t fd = 4; fd < most.rlim_cur; ++fd) close(static_cast<int>(fd));
  }
  if (geteuid() == 0 || getuid() == 0) {
    const uid_t nobody = 65534;
    if (setgroups(0, nullptr) != 0 || setresgid(nobody, nobody, nobody) != 0 ||
        setresuid(nobody, nobody, nobody) != 0)
      return false;
  }
  // Gone with the daemon; no new privileges; no core, no ptrace by peers.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 ||
      prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
    return false;
  bool ok = Limit(RLIMIT_FSIZE, 0) && Limit(RLIMIT_CORE, 0) && Limit(RLIMIT_NOFILE, 8) &&
            Limit(RLIMIT_NPROC, 0);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  ok = ok && Limit(RLIMIT_AS, rlim_t{2} << 30);
#endif
  return ok;
}

bool Sandbox() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
  if (ctx == nullptr) return false;
  int rc = 0;
  auto allow = [&](int call) { rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, call, 0); };
  auto allow_on = [&](int call, int fd) {
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, call, 1, SCMP_A0(SCMP_CMP_EQ, fd));
  };
  auto allow_no_exec = [&](int call, int prot_arg) {
    const scmp_arg_cmp prot = {static_cast<unsigned>(prot_arg), SCMP_CMP_MASKED_EQ, PROT_EXEC, 0};
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, call, 1, prot);
  };
  // The files it is given, and its socket.
  allow(SCMP_SYS(pread64));
  allow(SCMP_SYS(close));
  allow_on(SCMP_SYS(recvmsg), kSocket);
  allow_on(SCMP_SYS(sendmsg), kSocket);
  allow_on(SCMP_SYS(write), kSocket);
  // Memory, never executable.
  allow_no_exec(SCMP_SYS(mmap), 2);
  allow_no_exec(SCMP_SYS(mprotect), 2);
  allow(SCMP_SYS(munmap));
  allow(SCMP_SYS(mremap));
  allow(SCMP_SYS(brk));
  allow(SCMP_SYS(madvise));
  // Time, threads' locks, signals for abort, and leaving.
  allow(SCMP_SYS(clock_gettime));
  allow(SCMP_SYS(gettimeofday));
  allow(SCMP_SYS(futex));
  allow(SCMP_SYS(getpid));
  allow(SCMP_SYS(gettid));
  allow(SCMP_SYS(getrandom));
  allow(SCMP_SYS(rt_sigprocmask));
  allow(SCMP_SYS(rt_sigreturn));
  // abort() signals its own thread; no other process may be signalled.
  rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 2,
                         SCMP_A0(SCMP_CMP_EQ, static_cast<scmp_datum_t>(getpid())),
                         SCMP_A1(SCMP_CMP_EQ, static_cast<scmp_datum_t>(gettid())));
  allow(SCMP_SYS(exit));
  allow(SCMP_SYS(exit_group));
  rc |= seccomp_load(ctx);
  seccomp_release(ctx);
  return rc == 0;
}

int Serve() {
  for (;;) {
    std::string bytes;
    int fd = -1;
    const absl::Status got = ReceiveFrame(kSocket, kMaxRequestBytes, -1, &bytes, &fd);
    if (!got.ok()) return absl::IsUnavailable(got) ? 0 : 3;
    absl::StatusOr<Request> request = DecodeRequest(bytes);
    if (!request.ok() || fd < 0) return 3;
    const Answer answer = Describe(fd, *request);
    close(fd);
    if (!SendFrame(kSocket, EncodeAnswer(answer)).ok()) return 0;
  }
}

}  // namespace
}  // namespace h5probe
}  // namespace stoker

int main() {
  using namespace stoker::h5probe;
  if (!DropPrivileges()) {
    std::fprintf(stderr, "stoker-h5probe: cannot drop privileges\n");
    return 2;
  }
  if (absl::Status s = InitLibrary(); !s.ok()) {
    std::fprintf(stderr, "stoker-h5probe: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (!Sandbox()) {
    std::fprintf(stderr, "stoker-h5probe: cannot install its system-call filter\n");
    return 2;
  }
  // _exit: nothing at exit may run outside the allow-list.
  _exit(Serve());
}
