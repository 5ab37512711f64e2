#include "client/cpp/top.h"

#include "proto/spec_util.h"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace stoker {
namespace {

volatile std::sig_atomic_t interrupted = 0;
void OnSignal(int) { interrupted = 1; }

std::string Fit(const std::string& line, int width) {
  return line.size() > static_cast<size_t>(width) ? line.substr(0, width) : line;
}

// "2 nodes" (the pinned decode pools), or "off".
std::string NumaSummary(const v1::DaemonStats& s) {
  int nodes = 0;
  for (const v1::PoolStats& p : s.pools()) nodes += !p.cpus().empty();
  return nodes == 0 ? "off" : absl::StrFormat("%d node%s", nodes, nodes == 1 ? "" : "s");
}

}  // namespace

std::string RenderTop(const v1::DaemonStats& s, const std::string& socket,
                      int width) {
  std::vector<std::string> lines;
  lines.push_back(absl::StrFormat("stokerd %s pid %u  up %.0fs  %s  numa %s  %s",
                                  s.version(), s.pid(), s.uptime_seconds(), socket,
                                  NumaSummary(s),
                                  s.autotune() ? "autotune" : ""));
  lines.push_back(absl::StrFormat(
      "decoded %llu  failed %llu  read %.1f MiB  sessions %d",
      (unsigned long long)s.samples_decoded(), (unsigned long long)s.samples_failed(),
      s.bytes_read() / 1048576.0, s.sessions_size()));
  lines.push_back("");
  // The diagnosis and pixel columns as wide as their longest word; the
  // dataset takes what the width leaves (10 to 40 columns).
  size_t diag = 9, pix = 6;
  for (const v1::SessionStats& ss : s.sessions()) {
    diag = std::max(diag, std::string(DiagnosisName(ss.diagnosis())).size());
    pix = std::max(pix, std::string(PixelModeName(ss.pixel_mode())).size());
  }
  const int fixed = 8 + 1 + 1 + 4 + 1 + 7 + 1 + 6 + 1 + 5 + 1 + static_cast<int>(diag) + 1 +
                    static_cast<int>(pix);
  const size_t dsw = static_cast<size_t>(std::clamp(width - fixed, 10, 40));
  lines.push_back(absl::StrFormat("%-8s %-*s %4s %7s %6s %5s %-*s %s", "SESSION", dsw,
                                  "DATASET", "NODE", "IMG/S", "RING", "WAIT%", diag,
                                  "DIAGNOSIS", "PIXELS"));
  for (const v1::SessionStats& ss : s.sessions()) {
    std::string ds = ss.dataset();
    if (ds.size() > dsw) ds = "..." + ds.substr(ds.size() - (dsw - 3));
    lines.push_back(absl::StrFormat(
        "%-8llu %-*s %4d %7.0f %2u/%-3u %5.1f %-*s %s",
        (unsigned long long)ss.session_id(), dsw, ds, ss.numa_node(), ss.images_per_second(),
        ss.ring_ready(), ss.ring_slots(), 100 * ss.client_wait_fraction(), diag,
        DiagnosisName(ss.diagnosis()), PixelModeName(ss.pixel_mode())));
  }
  if (s.sessions_size() == 0) lines.push_back("(no sessions)");
  lines.push_back("");
  lines.push_back(absl::StrFormat("%-10s %8s %7s %8s %8s  %s", "POOL", "THREADS",
                                  "BUSY%", "QUEUED", "SPILLED", "CPUS"));
  for (const v1::PoolStats& p : s.pools()) {
    lines.push_back(absl::StrFormat("%-10s %8u %7.1f %8llu %8llu  %s", PoolLabel(p),
                                    p.threads(), 100 * p.busy_fraction(),
                                    (unsigned long long)p.queued(),
                                    (unsigned long long)p.spilled_in(), p.cpus()));
  }
  lines.push_back("");
  std::string caches = "cache hit rate:";
  for (const v1::TierStats& t : s.tiers()) {
    const uint64_t lookups = t.hits() + t.misses() + t.stale() + t.corrupt();
    caches += t.enabled() ? absl::StrFormat("  %s %.1f%%", t.tier(),
                                            lookups ? 100.0 * t.hits() / lookups : 0.0)
                          : absl::StrFormat("  %s off", t.tier());
  }
  lines.push_back(caches);
  lines.push_back("");
  lines.push_back("q: quit");
  std::string out;
  for (const std::string& l : lines) out += Fit(l, width) + "\n";
  return out;
}

int RunTop(Client& client, int iterations) {
  struct termios saved;
  const bool tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0;
  if (tty) {
    struct termios raw = saved;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    tcsetattr(STDIN_FILENO, TCSANOW, &raw);
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  int code = 0;
  for (int frame = 0; !interrupted && (iterations <= 0 || frame < iterations);
       ++frame) {
    auto stats = client.GetStats();
    std::string screen;
    if (stats.ok()) {
      struct winsize ws {};
      int width = 80;
      if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) width = ws.ws_col;
      screen = RenderTop(*stats, client.socket_path(), width);
    } else {
      screen = "stokerd: " + stats.status().ToString() + "\n\nq: quit\n";
      code = 1;
    }
    // Escape codes only for a terminal; a pipe gets plain frames.
    if (isatty(STDOUT_FILENO)) {
      std::printf("\x1b[H\x1b[2J%s", screen.c_str());
    } else {
      std::printf("%s\n", screen.c_str());
    }
    std::fflush(stdout);
    struct pollfd in = {STDIN_FILENO, POLLIN, 0};
    if (poll(&in, 1, 1000) > 0 && (in.revents & POLLIN)) {
      char c = 0;
      if (read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q')) break;
    }
  }
  if (tty) tcsetattr(STDIN_FILENO, TCSANOW, &saved);
  std::printf("\n");
  return code;
}

}  // namespace stoker
