// storage_bench: how well the reader stage hides storage latency, what the
// caller's own opens cost, and what each cache tier is worth. An in-process
// daemon (2 decode threads) reads a photo-like dataset through a file
// system that adds a fixed latency to every open of a file, as a NAS or S3
// mount would.
//
//   storage_bench [--data DIR] [--latency_ms 20] [--rounds 3]
//
// Prints medians over rounds of:
//   1. train and val throughput with every sample read from storage (L1
//      and the decoded cache off), without and with the latency, read by a
//      `stokerctl read` process of an ordinary user (uid 65534: confined,
//      every file opened by its own side with its rights) and of the
//      daemon's own user (an admin: the daemon opens the files itself, as
//      it did for every caller before); their ratios. Needs root (to run
//      the reader as another user); without it only the admin rows run.
//   2. epoch time with the latency: cold (L2 empty), L2-warm (a restarted
//      daemon on a filled L2), L1-warm (the next epoch in the same daemon).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/bench_util.h"
#include "absl/strings/str_cat.h"
#include "client/cpp/client.h"
#include "client/cpp/read_summary.h"
#include "server/access/fault_injecting_file_system.h"
#include "server/daemon/daemon.h"
#include "server/daemon/grpc_service.h"
#include "server/daemon/ring_handoff.h"
#include "shm/fd_passing.h"
#include "tests/testdata.h"

ABSL_FLAG(std::string, data, "/tmp/stoker-demo-data", "ImageFolder dataset.");
ABSL_FLAG(int, latency_ms, 20, "Injected latency per open of a file.");
ABSL_FLAG(int, rounds, 3, "Repetitions; medians are printed.");
ABSL_FLAG(int, threads, 2, "Decode threads.");
ABSL_FLAG(int, epochs, 4, "Epochs of each uncached read (every one from storage).");

namespace stoker {
namespace {

using bench::Median;

constexpr uid_t kNobody = 65534;

// An in-process daemon serving as stokerd does: the ring socket first, then
// the control socket, both open to every user (for the confined reader).
struct Served {
  std::string dir = testdata::MakeTempDir("bench");
  std::string socket = dir + "/s.sock";
  std::unique_ptr<Daemon> daemon;
  std::unique_ptr<RingHandoffServer> handoff;
  std::unique_ptr<GrpcServer> server;

  Served(DaemonOptions o, FileSystem* fs) {
    o.fs = fs;
    o.decode_threads = absl::GetFlag(FLAGS_threads);
    o.shm_prefix = absl::StrCat("stoker-bench", getpid(), ".");
    o.handoff_socket = shm::RingSocketPath(socket);
    chmod(dir.c_str(), 0755);
    daemon = std::make_unique<Daemon>(o);
    auto h = daemon->Start().ok() ? RingHandoffServer::Start(daemon.get(), o.handoff_socket, 0666)
                                  : absl::InternalError("daemon did not start");
    auto s = h.ok() ? GrpcServer::Start(daemon.get(), socket, 0666) : h.status();
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
      std::abort();
    }
    handoff = *std::move(h);
    server = *std::move(s);
  }
  ~Served() {
    daemon->Stop();
    server->Shutdown();
    handoff->Shutdown();
    daemon.reset();
    std::filesystem::remove_all(dir);
  }
};

// images/s of `stokerctl read` (--epochs) by `uid` (the daemon's own: an
// admin), or -1 when it failed.
double ReadAs(uid_t uid, const std::string& socket, const std::string& data,
              const char* transform) {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return -1;
  std::string bin(exe, static_cast<size_t>(n));
  bin = bin.substr(0, bin.rfind('/')) + "/../client/cpp/stokerctl";
  std::string cmd = uid == geteuid() ? "" : absl::StrCat("setpriv --reuid=", uid, " --regid=", uid,
                                                          " --clear-groups ");
  absl::StrAppend(&cmd, bin, " --socket ", socket, " read --dataset ", data, " --transform ",
                  transform, " --batch-size 32 --size 224 --ring-slots 8 --epochs ",
                  absl::GetFlag(FLAGS_epochs));
  FILE* out = popen(cmd.c_str(), "r");
  if (out == nullptr) return -1;
  std::string json;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof(buf), out)) > 0) json.append(buf, got);
  if (pclose(out) != 0) return -1;
  const std::string key = "\"images_per_second\": ";
  const size_t at = json.find(key);
  return at == std::string::npos ? -1 : std::strtod(json.c_str() + at + key.size(), nullptr);
}

struct Bench {
  FaultInjectingFileSystem fs{FileSystem::Default()};
  std::string data;

  // Runs `epochs` epochs of train on a fresh daemon, read by this process
  // (an admin); returns per-epoch summaries.
  std::vector<ReadSummary> Run(DaemonOptions o, int epochs) {
    Served served(o, &fs);
    std::vector<ReadSummary> out;
    auto client = Client::Connect(served.socket);
    if (!client.ok()) std::abort();
    v1::SessionSpec spec;
    spec.mutable_dataset()->mutable_folder()->set_path(data);
    spec.set_transform(v1::TRANSFORM_TRAIN);
    spec.set_batch_size(32);
    spec.set_image_size(224);
    spec.set_shuffle(true);
    spec.set_ring_slots(8);
    {
      auto session = (*client)->OpenSession(spec);
      if (!session.ok()) {
        std::fprintf(stderr, "%s\n", session.status().ToString().c_str());
        std::abort();
      }
      for (int e = 0; e < epochs; ++e) {
        auto s = ReadBatches(**session, (*session)->batches_per_epoch());
        if (!s.ok()) std::abort();
        out.push_back(*s);
      }
    }
    return out;
  }

  // images/s of `transform` read by `uid` with every sample
  // from storage (L1 and the decoded cache off).
  double Uncached(uid_t uid, const char* transform) {
    DaemonOptions o;
    o.l1_bytes = 0;
    o.decoded_cache_bytes = 0;
    Served served(o, &fs);
    return ReadAs(uid, served.socket, data, transform);
  }
};

int Main() {
  Bench b;
  b.data = absl::GetFlag(FLAGS_data);
  const absl::Duration latency = absl::Milliseconds(absl::GetFlag(FLAGS_latency_ms));
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const std::string l2 = testdata::MakeTempDir("bench-l2");

  // [transform][caller][latency]: images/s of each round.
  const char* transforms[] = {"train", "val"};
  const bool root = geteuid() == 0;
  std::vector<double> rate[2][2][2];
  std::vector<double> cold, l2warm, l1warm;
  for (int r = 0; r < rounds; ++r) {
    for (int t = 0; t < 2; ++t) {
      for (int slow = 0; slow < 2; ++slow) {
        b.fs.latency = slow ? latency : absl::ZeroDuration();
        for (int confined = 0; confined < (root ? 2 : 1); ++confined) {
          const double v = b.Uncached(confined ? kNobody : geteuid(), transforms[t]);
          if (v < 0) {
            std::fprintf(stderr, "stokerctl read failed\n");
            return 1;
          }
          rate[t][confined][slow].push_back(v);
        }
      }
    }
    b.fs.latency = latency;
    std::filesystem::remove_all(l2);
    DaemonOptions tiers;
    tiers.l2.path = l2;
    auto first = b.Run(tiers, 2);  // Cold epoch, then the L1-warm one.
    cold.push_back(first[0].seconds);
    l1warm.push_back(first[1].seconds);
    l2warm.push_back(b.Run(tiers, 1)[0].seconds);  // Restarted daemon.
    std::fprintf(stderr, "round %d/%d done\n", r + 1, rounds);
  }
  std::filesystem::remove_all(l2);
  const int ms = absl::GetFlag(FLAGS_latency_ms);
  std::printf("every read from storage (224, batch 32, %d decode threads, %d reader threads, "
              "medians of %d; img/s)\n",
              absl::GetFlag(FLAGS_threads), DaemonOptions().reader_threads, rounds);
  std::printf("  %-6s %-28s %9s %9s %9s\n", "", "reader", "0 ms",
              absl::StrCat(ms, " ms").c_str(), "ratio");
  for (int t = 0; t < 2; ++t) {
    for (int confined = 0; confined < (root ? 2 : 1); ++confined) {
      const double fast = Median(rate[t][confined][0]), slow = Median(rate[t][confined][1]);
      std::printf("  %-6s %-28s %9.1f %9.1f %9.3f\n", transforms[t],
                  confined ? "confined (uid 65534)" : "admin (the daemon's opens)", fast, slow,
                  slow / fast);
    }
    if (root) {
      std::printf("  %-6s %-28s %9.3f %9.3f\n", transforms[t], "confined / admin",
                  Median(rate[t][1][0]) / Median(rate[t][0][0]),
                  Median(rate[t][1][1]) / Median(rate[t][0][1]));
    }
  }
  std::printf("epoch time with %d ms storage latency (train, admin)\n", ms);
  std::printf("  cold (L2 empty):        %6.3f s\n", Median(cold));
  std::printf("  L2-warm (new daemon):   %6.3f s\n", Median(l2warm));
  std::printf("  L1-warm (next epoch):   %6.3f s\n", Median(l1warm));
  return 0;
}

}  // namespace
}  // namespace stoker

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return stoker::Main();
}
