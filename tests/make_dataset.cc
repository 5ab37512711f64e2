// make_dataset: writes a photographic-like JPEG dataset in ImageFolder
// layout, showing progress. Used by `make demo` and the benchmarks.
//   make_dataset --out DIR [--classes C] [--per_class N] [--min_side A]
//                [--max_side B] [--quality Q] [--seed S]
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "tests/testdata.h"

ABSL_FLAG(std::string, out, "", "Output folder (created).");
ABSL_FLAG(int, classes, 4, "Number of class folders.");
ABSL_FLAG(int, per_class, 50, "Images per class.");
ABSL_FLAG(int, min_side, 375, "Smallest image side.");
ABSL_FLAG(int, max_side, 500, "Largest image side.");
ABSL_FLAG(int, quality, 90, "JPEG quality.");
ABSL_FLAG(uint64_t, seed, 1, "Content seed.");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  stoker::testdata::FolderSpec spec;
  const std::string out = absl::GetFlag(FLAGS_out);
  spec.classes = absl::GetFlag(FLAGS_classes);
  spec.per_class = absl::GetFlag(FLAGS_per_class);
  spec.min_side = absl::GetFlag(FLAGS_min_side);
  spec.max_side = absl::GetFlag(FLAGS_max_side);
  spec.quality = absl::GetFlag(FLAGS_quality);
  spec.seed = absl::GetFlag(FLAGS_seed);
  if (out.empty() || spec.classes < 1 || spec.per_class < 1 ||
      spec.min_side < 8 || spec.max_side < spec.min_side) {
    std::fprintf(stderr,
                 "make_dataset: need --out, classes/per_class >= 1 and "
                 "8 <= min_side <= max_side\n");
    return 2;
  }
  size_t total_bytes = 0;
  spec.progress = [&](int done, int total, size_t bytes) {
    total_bytes += bytes;
    if (done % 10 == 0 || done == total) {
      std::fprintf(stderr, "\rmake_dataset: %d/%d images", done, total);
    }
  };
  auto paths = stoker::testdata::MakeFolderDataset(out, spec);
  if (!paths.ok()) {
    std::fprintf(stderr, "\nmake_dataset: %s\n",
                 paths.status().ToString().c_str());
    return 1;
  }
  std::fprintf(stderr, "\nmake_dataset: %zu images, %.1f KB average, in %s\n",
               paths->size(), total_bytes / 1024.0 / paths->size(), out.c_str());
  return 0;
}
