#include "client/cpp/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

extern char** environ;

namespace stoker {
namespace {

// Closes the descriptors it holds when it goes.
struct Fds {
  int fd[4] = {-1, -1, -1, -1};
  ~Fds() {
    for (int f : fd) Close(f);
  }
  static void Close(int& f) {
    if (f >= 0) ::close(f);
    f = -1;
  }
};

int PollMillis(absl::Duration left) {
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 60000));
}

// Reaps `pid`, waiting no later than `deadline` (a child may close its
// output and go on running): false if it still ran then.
bool ReapBy(pid_t pid, absl::Time deadline, int* status) {
  absl::Duration nap = absl::Milliseconds(1);
  for (;;) {
    const pid_t r = ::waitpid(pid, status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {  // ECHILD: SIGCHLD is ignored, and it was reaped for us.
      *status = 0;
      return true;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(std::min(nap, left)));
    nap = std::min(nap * 2, absl::Milliseconds(50));
  }
}

void KillAndReap(pid_t pid, int* status) {
  ::kill(-pid, SIGKILL);  // Its group: what it started holds our pipes too.
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

absl::StatusOr<std::vector<std::string>> SplitCommandLine(absl::string_view line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    const bool last = i + 1 == line.size();
    if (quote == '\'') {
      if (c == '\'') {
        quote = 0;
      } else {
        word += c;
      }
      continue;
    }
    if (quote == '"') {
      if (c == '"') {
        quote = 0;
      } else if (c == '\\' && last) {
        return absl::InvalidArgumentError("a backslash ends the command line");
      } else if (c == '\\' && (line[i + 1] == '"' || line[i + 1] == '\\')) {
        word += line[++i];
      } else {
        word += c;
      }
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '\\') {
      if (last) return absl::InvalidArgumentError("a backslash ends the command line");
      word += line[++i];
    } else {
      word += c;
    }
  }
  if (quote != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("no closing quotation (", std::string(1, quote), ")"));
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

std::string ChildResult::Describe(const ChildLimits& limits) const {
  switch (end) {
    case End::kExited:
      return absl::StrCat("exited ", code);
    case End::kSignalled:
      return absl::StrCat("was killed by signal ", code);
    case End::kTimedOut:
      return absl::StrCat("ran past ", absl::FormatDuration(limits.timeout), " and was killed");
    case End::kStdoutTooLarge:
      return absl::StrCat("wrote more than ", limits.max_stdout, " bytes to stdout and was killed");
  }
  return "ended";
}

std::vector<std::string> EnvironmentNow() {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) out.emplace_back(*e);
  return out;
}

absl::StatusOr<ChildResult> RunChild(const std::vector<std::string>& argv,
                                     const ChildLimits& limits) {
  if (argv.empty()) return absl::InvalidArgumentError("no program to run");
  Fds fds;  // stdout read, write; stderr read, write.
  if (::pipe2(fds.fd, O_CLOEXEC) != 0 || ::pipe2(fds.fd + 2, O_CLOEXEC) != 0) {
    return ErrnoStatus(errno, "pipe");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds.fd[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds.fd[3], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // A session of its own (so a group of its own): no terminal to stop it
  // on (a prompt fails at once, in its own words, instead of hanging).
  if (posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
                                          POSIX_SPAWN_SETSIGDEF) != 0) {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    return absl::InternalError("this C library cannot start a helper in a session of its own");
  }
  sigset_t signals;
  sigemptyset(&signals);
  posix_spawnattr_setsigmask(&attr, &signals);
  sigaddset(&signals, SIGPIPE);
  sigaddset(&signals, SIGXFSZ);
  posix_spawnattr_setsigdefault(&attr, &signals);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;
  if (limits.environment.has_value()) {
    for (const std::string& e : *limits.environment) env.push_back(const_cast<char*>(e.c_str()));
    env.push_back(nullptr);
  }
  pid_t pid = -1;
  const int spawned = ::posix_spawnp(&pid, args[0], &actions, &attr, args.data(),
                                     limits.environment.has_value() ? env.data() : environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  Fds::Close(fds.fd[1]);
  Fds::Close(fds.fd[3]);
  if (spawned != 0) return ErrnoStatus(spawned, absl::StrCat("cannot run `", argv[0], "`"));

  ChildResult result;
  const absl::Time deadline = absl::Now() + limits.timeout;
  pollfd polled[2] = {{fds.fd[0], POLLIN, 0}, {fds.fd[2], POLLIN, 0}};
  char buf[16384];
  while (result.end == ChildResult::End::kExited && (polled[0].fd >= 0 || polled[1].fd >= 0)) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      result.end = ChildResult::End::kTimedOut;
      break;
    }
    if (::poll(polled, 2, PollMillis(left)) < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      int status = 0;
      KillAndReap(pid, &status);
      return ErrnoStatus(e, "poll");
    }
    for (int i = 0; i < 2; ++i) {
      if (polled[i].fd < 0 || polled[i].revents == 0) continue;
      const ssize_t n = ::read(polled[i].fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        polled[i].fd = -1;  // EOF (Fds closes it).
        continue;
      }
      std::string& to = i == 0 ? result.out : result.err;
      const size_t cap = i == 0 ? limits.max_stdout : limits.max_stderr;
      if (i == 0 && to.size() + n > cap) result.end = ChildResult::End::kStdoutTooLarge;
      to.append(buf, std::min(static_cast<size_t>(n), cap - std::min(cap, to.size())));
    }
  }
  int status = 0;
  if (result.end != ChildResult::End::kExited || !ReapBy(pid, deadline, &status)) {
    if (result.end == ChildResult::End::kExited) result.end = ChildResult::End::kTimedOut;
    KillAndReap(pid, &status);
    return result;
  }
  if (WIFSIGNALED(status)) {
    result.end = ChildResult::End::kSignalled;
    result.code = WTERMSIG(status);
  } else {
    result.code = WEXITSTATUS(status);
  }
  return result;
}

}  // namespace stoker
