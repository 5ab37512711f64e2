// storage_bench: how well the reader stage hides storage latency, and what
// each cache tier is worth. An in-process daemon (2 decode threads) reads a
// photo-like dataset through a file system that adds a fixed latency to
// every read and stat, as a NAS or S3 mount would.
//
//   storage_bench [--data DIR] [--latency_ms 20] [--rounds 3]
//
// Prints medians over rounds of:
//   1. train throughput with every sample read from storage (L1 off),
//      without and with the latency, and their ratio;
//   2. epoch time with the latency: cold (L2 empty), L2-warm (a restarted
//      daemon on a filled L2), L1-warm (the next epoch in the same daemon).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/bench_util.h"
#include "absl/strings/str_cat.h"
#include "client/cpp/client.h"
#include "client/cpp/read_summary.h"
#include "server/daemon.h"
#include "server/grpc_service.h"
#include "tests/testdata.h"

ABSL_FLAG(std::string, data, "/tmp/stoker-demo-data", "ImageFolder dataset.");
ABSL_FLAG(int, latency_ms, 20, "Injected latency per read and stat.");
ABSL_FLAG(int, rounds, 3, "Repetitions; medians are printed.");
ABSL_FLAG(int, threads, 2, "Decode threads.");

namespace stoker {
namespace {

using bench::Median;

struct Bench {
  FaultInjectingFileSystem fs{FileSystem::Default()};
  std::string data;

  // Runs `epochs` epochs of train on a fresh daemon; returns per-epoch
  // summaries.
  std::vector<ReadSummary> Run(DaemonOptions o, int epochs) {
    const std::string dir = testdata::MakeTempDir("bench");
    o.fs = &fs;
    o.decode_threads = absl::GetFlag(FLAGS_threads);
    o.shm_prefix = absl::StrCat("stoker-bench", getpid(), ".");
    Daemon daemon(o);
    std::vector<ReadSummary> out;
    if (!daemon.Start().ok()) std::abort();
    auto server = GrpcServer::Start(&daemon, dir + "/s.sock");
    auto client = Client::Connect(dir + "/s.sock");
    if (!server.ok() || !client.ok()) std::abort();
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
    daemon.Stop();
    (*server)->Shutdown();
    std::filesystem::remove_all(dir);
    return out;
  }
};

int Main() {
  Bench b;
  b.data = absl::GetFlag(FLAGS_data);
  const absl::Duration latency = absl::Milliseconds(absl::GetFlag(FLAGS_latency_ms));
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const std::string l2 = testdata::MakeTempDir("bench-l2");

  std::vector<double> fast, slow, cold, l2warm, l1warm;
  for (int r = 0; r < rounds; ++r) {
    DaemonOptions uncached;
    uncached.l1_bytes = 0;
    uncached.decoded_cache_bytes = 0;
    b.fs.latency = absl::ZeroDuration();
    fast.push_back(b.Run(uncached, 1)[0].images_per_second);
    b.fs.latency = latency;
    slow.push_back(b.Run(uncached, 1)[0].images_per_second);

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
  std::printf("storage latency hiding (train, 224, batch 32, %d decode threads, "
              "%d reader threads, medians of %d)\n",
              absl::GetFlag(FLAGS_threads), DaemonOptions().reader_threads, rounds);
  std::printf("  every read from storage, 0 ms:  %8.1f img/s\n", Median(fast));
  std::printf("  every read from storage, %d ms: %8.1f img/s  ratio %.3f\n", ms,
              Median(slow), Median(slow) / Median(fast));
  std::printf("epoch time with %d ms storage latency\n", ms);
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
