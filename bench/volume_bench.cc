// volume_bench: what decoding one NIfTI volume costs, per core: its time
// and the memory it holds besides the volume it fills, for .nii and for
// .nii.gz as nibabel writes it (gzip level 1).
//
//   volume_bench [--rounds 5] [--dir /tmp] [--map_blocks=false]
//
// Volumes with structure plus noise: a T1-like 256x256x160 int16 scan, and
// an fMRI-like 96x96x60x120 int16 series with scl_slope set (decoded to
// float32). Per file: the median decode time over rounds (one thread) and
// the peak RSS a decode adds once the volume's own pages are touched
// (VmHWM, reset through /proc/self/clear_refs before each decode; blocks
// over 128 KiB mapped afresh each time).
#include <malloc.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/bench_util.h"
#include "server/sources/arrays/nifti_file.h"
#include "tests/testdata.h"

ABSL_FLAG(int, rounds, 5, "Decodes of each file; medians are printed.");
ABSL_FLAG(std::string, dir, "/tmp", "Where the volumes are written.");
ABSL_FLAG(bool, map_blocks, true,
          "Map blocks over 128 KiB afresh (true: the held column is each decode's; "
          "false: malloc's defaults, as the daemon runs, for times).");

namespace stoker {
namespace {

// The process's VmRSS or VmHWM in KiB.
long StatusKb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::string(field).size()));
  return -1;
}

void ResetPeak() { std::ofstream("/proc/self/clear_refs") << "5"; }

// int16 voxels, x fastest: a bright ellipsoid with texture, plus noise.
std::string Voxels(const std::vector<int64_t>& dims) {
  uint64_t total = 1;
  for (int64_t d : dims) total *= d;
  std::string raw(total * 2, '\0');
  uint32_t rng = 12345;
  for (uint64_t i = 0; i < total; ++i) {
    const double x = static_cast<double>(i % dims[0]) / dims[0] - 0.5;
    const double y = static_cast<double>(i / dims[0] % dims[1]) / dims[1] - 0.5;
    const double z = static_cast<double>(i / dims[0] / dims[1] % dims[2]) / dims[2] - 0.5;
    rng = rng * 1664525u + 1013904223u;
    const double inside = x * x + y * y + z * z < 0.2 ? 800 + 200 * std::sin(40 * x * y) : 0;
    const int16_t v = static_cast<int16_t>(inside + (rng >> 27));
    std::memcpy(&raw[i * 2], &v, 2);
  }
  return raw;
}

int Main() {
  // Large blocks mapped and unmapped each time, so the peak shows every
  // decode's temporaries (not pages a freed heap kept).
  if (absl::GetFlag(FLAGS_map_blocks)) mallopt(M_MMAP_THRESHOLD, 128 << 10);
  struct Volume {
    const char* name;
    std::vector<int64_t> dims;
    float slope;
  } volumes[] = {{"t1", {256, 256, 160}, 0}, {"fmri", {96, 96, 60, 120}, 0.5f}};
  const int rounds = absl::GetFlag(FLAGS_rounds);
  std::printf("%-14s %10s %10s %10s %12s\n", "file", "MiB", "volume MiB", "ms", "held MiB");
  for (const Volume& v : volumes) {
    const std::string bytes = testdata::NiftiBytes(1, v.dims, 4, Voxels(v.dims), v.slope, 0);
    for (const bool gz : {false, true}) {
      const std::string path =
          absl::GetFlag(FLAGS_dir) + "/volume_bench_" + v.name + (gz ? ".nii.gz" : ".nii");
      const std::string file = gz ? testdata::Gzip(bytes, 1) : bytes;
      if (!testdata::WriteFile(path, file).ok()) return 1;
      FileVersion version;
      absl::StatusOr<nifti::Header> h = nifti::ReadHeader(path, nullptr, &version);
      if (!h.ok()) {
        std::fprintf(stderr, "%s\n", h.status().ToString().c_str());
        return 1;
      }
      std::vector<uint8_t> out(h->volume_bytes, 1);  // Touched: its pages count now.
      std::vector<double> ms, held;
      for (int r = 0; r < rounds; ++r) {
        ResetPeak();
        const long before = StatusKb("VmRSS:");
        const auto t0 = std::chrono::steady_clock::now();
        absl::Status s =
            nifti::Decode(path, nullptr, *h, version, &VolumeCache::Serial, out.data());
        const auto t1 = std::chrono::steady_clock::now();
        if (!s.ok()) {
          std::fprintf(stderr, "%s\n", s.ToString().c_str());
          return 1;
        }
        ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        held.push_back((StatusKb("VmHWM:") - before) / 1024.0);
      }
      std::printf("%-14s %10.1f %10.1f %10.1f %12.1f\n",
                  (std::string(v.name) + (gz ? ".nii.gz" : ".nii")).c_str(),
                  file.size() / 1048576.0, h->volume_bytes / 1048576.0, bench::Median(ms),
                  bench::Median(held));
      std::remove(path.c_str());
    }
  }
  return 0;
}

}  // namespace
}  // namespace stoker

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return stoker::Main();
}
