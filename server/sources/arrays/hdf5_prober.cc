#include "server/sources/arrays/hdf5_prober.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace stoker {
namespace h5 {
namespace {

absl::Mutex program_mu;
std::string& ProgramSetting() {
  static std::string* p = new std::string;
  return *p;
}

// The environment a reader gets: only what sanitizer builds read.
std::vector<std::string> ReaderEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    if (kv.rfind("ASAN_OPTIONS=", 0) == 0 || kv.rfind("UBSAN_OPTIONS=", 0) == 0 ||
        kv.rfind("LSAN_OPTIONS=", 0) == 0)
      env.push_back(kv);
  }
  return env;
}

}  // namespace

void Prober::SetProgram(const std::string& path) {
  absl::MutexLock lock(&program_mu);
  ProgramSetting() = path;
}

std::string Prober::Program() {
  {
    absl::MutexLock lock(&program_mu);
    if (!ProgramSetting().empty()) return ProgramSetting();
  }
  if (const char* env = std::getenv("STOKER_H5PROBE"); env != nullptr && *env != '\0') return env;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string dir = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string();
  dir = dir.substr(0, dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/'));
  return dir + "/stoker-h5probe";
}

Prober::~Prober() {
  absl::MutexLock lock(&mu_);
  Stop();
}

absl::Status Prober::Start() {
  int s[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s) != 0)
    return absl::ResourceExhaustedError(absl::StrCat("socketpair: ", strerror(errno)));
  // The reader's end becomes its fd 3 (dup2 clears close-on-exec); moved
  // above 3 first, so that neither dup2 onto itself nor the /dev/null
  // opens of 0-2 can touch it.
  const int theirs = fcntl(s[1], F_DUPFD_CLOEXEC, 4);
  close(s[1]);
  if (theirs < 0) {
    close(s[0]);
    return absl::ResourceExhaustedError(absl::StrCat("fcntl: ", strerror(errno)));
  }
  const std::string& program = program_;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, theirs, 3);
  // No signal blocked or ignored as the daemon has them.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<std::string> env = ReaderEnvironment();
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string arg0 = program;
  char* argv[] = {arg0.data(), nullptr};
  pid_t pid = -1;
  const int err = posix_spawn(&pid, program.c_str(), &actions, &attr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(theirs);
  if (err != 0) {
    close(s[0]);
    return absl::FailedPreconditionError(absl::StrCat(
        "the HDF5 reader ", program, " cannot be started (", strerror(err),
        "): install stoker-h5probe beside stokerd, or name it with --hdf5-reader"));
  }
  pid_ = pid;
  sock_ = s[0];
  started_.fetch_add(1);
  return absl::OkStatus();
}

std::string Prober::Stop() {
  if (pid_ < 0) return "";
  close(sock_);
  sock_ = -1;
  // Killed, never waited on to leave: the reader has nothing to keep, and
  // one that ignored its socket's end would hold this thread.
  kill(pid_, SIGKILL);
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  pid_ = -1;
  if (r < 0) return "it ended";
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    if (sig == SIGSYS) return "it was stopped by its system-call filter";
    return absl::StrCat("it was killed by signal ", sig, " (", strsignal(sig), ")");
  }
  return absl::StrCat("it exited with status ", WEXITSTATUS(status));
}

absl::StatusOr<h5probe::Answer> Prober::Describe(int fd, uint64_t size,
                                                 const std::vector<std::string>& names,
                                                 const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (pid_ < 0) {
    if (absl::Status s = Start(); !s.ok()) return s;
  }
  const std::string request = h5probe::EncodeRequest(h5probe::Request{size, names});
  std::string bytes;
  int stray = -1;
  absl::Status s = h5probe::SendFrame(sock_, request, fd, timeout_ms_);
  if (s.ok()) s = h5probe::ReceiveFrame(sock_, h5probe::kMaxAnswerBytes, timeout_ms_, &bytes, &stray);
  if (stray >= 0) close(stray);
  // An answer before the whole request was read answers nothing asked.
  int unread = 0;
  if (s.ok() && (ioctl(sock_, SIOCOUTQ, &unread) != 0 || unread != 0))
    s = absl::DataLossError("the HDF5 reader answered before reading its request");
  absl::StatusOr<h5probe::Answer> answer =
      s.ok() ? h5probe::DecodeAnswer(bytes) : absl::StatusOr<h5probe::Answer>(s);
  if (answer.ok() && answer->datasets.size() != names.size())
    answer = absl::DataLossError("the HDF5 reader's answer is malformed");
  if (answer.ok()) return answer;
  lost_.fetch_add(1);
  const std::string how = Stop();
  if (absl::IsDeadlineExceeded(answer.status())) {
    return absl::DataLossError(absl::StrCat(path, ": the HDF5 reader did not finish with it in ",
                                            timeout_ms_ / 1000.0, " s"));
  }
  return absl::DataLossError(absl::StrCat(path, ": the HDF5 reader failed on it (",
                                          answer.status().message(), "; ", how, ")"));
}

}  // namespace h5
}  // namespace stoker
