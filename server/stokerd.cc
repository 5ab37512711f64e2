// stokerd: the Stoker per-node daemon. Serves the control plane on a Unix
// socket and fills each session's prefetch ring in /dev/shm. Stops cleanly
// on SIGTERM or SIGINT: rings are closed (clients see "shutting down"),
// removed, and the socket file is unlinked. Its flags are
// server/daemon/flags.h's; this file only starts and stops the parts.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/daemon/daemon.h"
#include "server/daemon/flags.h"
#include "server/daemon/grpc_service.h"
#include "server/daemon/metrics.h"
#include "server/daemon/owners.h"
#include "server/daemon/ring_handoff.h"
#include "server/daemon/systemd_notify.h"
#include "server/sources/arrays/hdf5_prober.h"
#include "util/log.h"

namespace {

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "stokerd: %s\n", message.c_str());
  return code;
}

// The control socket's folder, made if missing, writable by this user
// only whatever the umask: the servers refuse a folder others could write.
void MakeSocketFolder(const std::string& socket) {
  std::error_code ec;
  const auto parent = std::filesystem::path(socket).parent_path();
  if (parent.empty() || std::filesystem::exists(parent, ec)) return;
  std::filesystem::create_directories(parent, ec);
  if (!ec) chmod(parent.c_str(), 0755);
}

// What a stop may take at most after the signal. Every wait on a client,
// an opener, a store or a scan is cancelled by Daemon::Stop; what cannot be
// (a read stuck in the kernel on a hung NFS mount) is left behind: past
// this the process exits anyway, with kStopForced (its rings are memfds
// and go with it; L2 is a transactional LMDB file; its sockets are
// replaced by the next daemon).
constexpr absl::Duration kStopWithin = absl::Milliseconds(1800);
constexpr int kStopForced = 3;
// In-flight calls the control plane still lets finish once every session
// has been closed.
constexpr absl::Duration kCallsGrace = absl::Milliseconds(250);

// What the stop is doing; null once it is done.
std::atomic<const char*> g_stop_stage{"closing sessions"};

void ExitIfStopHangs() {
  std::thread([] {
    absl::SleepFor(kStopWithin);
    const char* stage = g_stop_stage.load();
    if (stage == nullptr) return;  // Stopped: main is returning.
    stoker::LogWarning(absl::StrCat("stop still ", stage, " after ",
                                    absl::FormatDuration(kStopWithin), ": exiting now"));
    _exit(kStopForced);
  }).detach();
}

}  // namespace

int main(int argc, char** argv) {
  if (stoker::ParseFlags(argc, argv)) return 0;
  absl::StatusOr<stoker::StokerdConfig> parsed = stoker::Config();
  if (!parsed.ok()) return Fail(2, std::string(parsed.status().message()));
  const stoker::StokerdConfig& config = *parsed;
  // Before any thread or secret: no core file or same-user ptrace may
  // read trainers' credentials and batches out of this process.
  if (!config.allow_core_dumps && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    return Fail(1, absl::StrCat("prctl(PR_SET_DUMPABLE): ", std::strerror(errno)));
  }
  if (!config.hdf5_reader.empty()) stoker::h5::Prober::SetProgram(config.hdf5_reader);
  if (access(stoker::h5::Prober::Program().c_str(), X_OK) != 0) {
    stoker::LogWarning(absl::StrCat("the HDF5 reader ", stoker::h5::Prober::Program(),
                                    " is missing: HDF5 datasets cannot be read (--hdf5-reader)"));
  }

  // Block the stop signals in every thread; the main thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  MakeSocketFolder(config.socket);

  stoker::Daemon daemon(config.daemon);
  if (absl::Status s = daemon.Start(); !s.ok()) return Fail(1, s.ToString());
  std::unique_ptr<stoker::MetricsServer> metrics;
  if (const std::string& addr = config.metrics_address; !addr.empty()) {
    auto m = stoker::MetricsServer::Start(&daemon, addr);
    if (!m.ok()) return Fail(1, m.status().ToString());
    metrics = *std::move(m);
    stoker::LogInfo(absl::StrCat("metrics on http://", addr.substr(0, addr.rfind(':')), ":",
                                 metrics->port(), "/metrics"));
  }
  auto handoff = stoker::RingHandoffServer::Start(&daemon, config.daemon.handoff_socket,
                                                  config.socket_mode);
  if (!handoff.ok()) return Fail(1, handoff.status().ToString());
  auto server = stoker::GrpcServer::Start(&daemon, config.socket, config.socket_mode);
  if (!server.ok()) return Fail(1, server.status().ToString());
  const stoker::DaemonOptions& o = config.daemon;
  stoker::LogInfo(absl::StrCat(
      "stokerd serving on unix:", config.socket, " with ", daemon.decode_threads(),
      " decode and ", o.reader_threads, " reader threads, L1 ", o.l1_bytes >> 20,
      " MiB, L2 ", o.l2.path.empty() ? "off" : o.l2.path));
  stoker::ExitWithOwners(config.exit_with_pid, config.owners_dir);
  stoker::NotifySystemd(absl::StrCat("READY=1\nSTATUS=serving on ", config.socket));

  int sig = 0;
  sigwait(&stop_signals, &sig);
  stoker::LogInfo(absl::StrCat("signal ", sig, ": shutting down"));
  stoker::NotifySystemd("STOPPING=1");
  ExitIfStopHangs();
  daemon.Stop();
  g_stop_stage = "ending control calls";
  (*server)->Shutdown(kCallsGrace);
  g_stop_stage = "ending ring socket exchanges";
  (*handoff)->Shutdown();
  g_stop_stage = "ending metrics";
  metrics.reset();
  g_stop_stage = nullptr;
  stoker::LogInfo("stopped");
  return 0;
}
