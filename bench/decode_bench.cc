// decode_bench: single-thread cost of each step of the decode path on a
// dataset's files (already in memory), and the naive ceiling.
//
//   decode_bench [--data DIR] [--size 224] [--transform train|val]
//                [--threads N] [--rounds 3]
//
// Per sample, median over rounds: full TurboJPEG decode (tjDecompress2) +
// our resize (the "naive" path), and for each lever (full, crop,
// scale+crop) our decode and resize separately. The naive ceiling is
// threads x single-thread naive img/s.
#include <turbojpeg.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/bench_util.h"
#include "server/imaging/decode.h"
#include "server/sources/files/folder.h"
#include "server/access/file_system.h"
#include "server/imaging/jpeg.h"
#include "server/imaging/transform.h"
#include "util/rng.h"

ABSL_FLAG(std::string, data, "/tmp/stoker-demo-data", "ImageFolder dataset.");
ABSL_FLAG(int, size, 224, "Output size.");
ABSL_FLAG(std::string, transform, "train", "train or val geometry.");
ABSL_FLAG(int, threads, 2, "Cores for the naive ceiling.");
ABSL_FLAG(int, rounds, 3, "Repetitions; medians are printed.");

namespace stoker {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

using bench::Median;

int Main() {
  auto ds = LoadFolderDataset(absl::GetFlag(FLAGS_data));
  if (!ds.ok()) {
    std::fprintf(stderr, "%s\n", ds.status().ToString().c_str());
    return 1;
  }
  std::vector<std::string> files;
  for (const Sample& s : ds->samples) {
    std::string bytes;
    if (FileSystem::Default()->ReadFile(s.path, &bytes, nullptr).ok()) {
      files.push_back(std::move(bytes));
    }
  }
  const int size = absl::GetFlag(FLAGS_size);
  const bool train = absl::GetFlag(FLAGS_transform) == "train";
  std::vector<uint8_t> out(static_cast<size_t>(size) * size * 3);
  JpegDecoder& dec = ThreadLocalDecoder();
  tjhandle tj = tjInitDecompress();
  RgbImage full;
  DecodedRegion region;

  std::vector<double> naive, lever_decode[3], lever_resize[3];
  for (int r = 0; r < absl::GetFlag(FLAGS_rounds); ++r) {
    Clock::duration naive_t{}, d_t[3]{}, r_t[3]{};
    for (size_t i = 0; i < files.size(); ++i) {
      const auto* data = reinterpret_cast<const uint8_t*>(files[i].data());
      const size_t n = files[i].size();
      int w = 0, h = 0, sub = 0, cs = 0;
      tjDecompressHeader3(tj, data, n, &w, &h, &sub, &cs);
      Rng rng(MixSeed({1, 0, i}));
      const CropBox box = train ? RandomResizedCropBox(w, h, rng)
                                : CenterCropBox(w, h, size);
      // Naive: full TurboJPEG decode, then resize.
      auto t0 = Clock::now();
      full.pixels.resize(static_cast<size_t>(w) * h * 3);
      tjDecompress2(tj, data, n, full.pixels.data(), w, 0, h, TJPF_RGB,
                    TJFLAG_ACCURATEDCT);
      ResizeBox(full.pixels.data(), w, h, box, size, size, out.data());
      naive_t += Clock::now() - t0;
      for (int lever = 0; lever < 3; ++lever) {
        auto t1 = Clock::now();
        CropBox b;
        if (absl::Status st = DecodeForCrop(dec, data, n, [&](int, int) { return box; }, size,
                                            lever == 2, lever != 0, &region, &b);
            !st.ok()) {
          std::fprintf(stderr, "decode failed: %s\n", std::string(st.message()).c_str());
          return 1;
        }
        auto t2 = Clock::now();
        ResizeBox(region.image.pixels.data(), region.image.width,
                  region.image.height, b, size, size, out.data());
        d_t[lever] += t2 - t1;
        r_t[lever] += Clock::now() - t2;
      }
    }
    const double k = 1.0 / files.size();
    naive.push_back(Ms(naive_t) * k);
    for (int l = 0; l < 3; ++l) {
      lever_decode[l].push_back(Ms(d_t[l]) * k);
      lever_resize[l].push_back(Ms(r_t[l]) * k);
    }
  }
  tjDestroy(tj);
  const int threads = absl::GetFlag(FLAGS_threads);
  std::printf("%s %d, %zu files, single thread, ms per sample (medians of %d)\n",
              train ? "train" : "val", size, files.size(),
              absl::GetFlag(FLAGS_rounds));
  std::printf("  naive (tjDecompress2 full + resize): %.3f ms -> ceiling %d x "
              "%.0f = %.0f img/s\n",
              Median(naive), threads, 1e3 / Median(naive),
              threads * 1e3 / Median(naive));
  const char* names[] = {"full", "crop", "scale+crop"};
  for (int l = 0; l < 3; ++l) {
    const double d = Median(lever_decode[l]), z = Median(lever_resize[l]);
    std::printf("  %-10s decode %.3f ms + resize %.3f ms = %.3f ms (%.0f img/s "
                "per core)\n", names[l], d, z, d + z, 1e3 / (d + z));
  }
  return 0;
}

}  // namespace
}  // namespace stoker

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return stoker::Main();
}
