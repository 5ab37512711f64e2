// make_dataset: writes a photographic-like JPEG dataset in ImageFolder
// layout, showing progress. Used by `make demo` and the benchmarks.
//   make_dataset --out DIR [--classes C] [--per_class N] [--min_side A]
//                [--max_side B] [--quality Q] [--seed S] [--lmdb DB]
// With --lmdb, the same files are also packed into an LMDB environment
// (folder DB, key = path relative to DIR), the layout of an LMDB source.
#include <lmdb.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "server/cache/lmdb_env.h"
#include "tests/testdata.h"

ABSL_FLAG(std::string, out, "", "Output folder (created).");
ABSL_FLAG(int, classes, 4, "Number of class folders.");
ABSL_FLAG(int, per_class, 50, "Images per class.");
ABSL_FLAG(int, min_side, 375, "Smallest image side.");
ABSL_FLAG(int, max_side, 500, "Largest image side.");
ABSL_FLAG(int, quality, 90, "JPEG quality.");
ABSL_FLAG(uint64_t, seed, 1, "Content seed.");
ABSL_FLAG(std::string, lmdb, "", "Also pack the files into this LMDB folder.");

namespace {

absl::Status PackLmdb(const std::string& root, const std::vector<std::string>& paths,
                      const std::string& db) {
  stoker::LmdbEnv::Options o;
  o.read_only = false;
  o.map_bytes = 1ULL << 32;
  auto env = stoker::LmdbEnv::Open(db, o);
  if (!env.ok()) return env.status();
  return (*env)->WriteTxn([&](MDB_txn* txn, MDB_dbi dbi) {
    for (const std::string& path : paths) {
      std::ifstream in(path, std::ios::binary);
      std::stringstream bytes;
      bytes << in.rdbuf();
      std::string value = bytes.str();
      std::string key = path.substr(root.size() + 1);
      MDB_val k{key.size(), key.data()}, v{value.size(), value.data()};
      if (int rc = mdb_put(txn, dbi, &k, &v, 0); rc != 0) {
        return absl::InternalError(absl::StrCat("mdb_put: ", mdb_strerror(rc)));
      }
    }
    return absl::OkStatus();
  });
}

}  // namespace

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
  if (const std::string db = absl::GetFlag(FLAGS_lmdb); !db.empty()) {
    if (absl::Status s = PackLmdb(out, *paths, db); !s.ok()) {
      std::fprintf(stderr, "make_dataset: %s\n", s.ToString().c_str());
      return 1;
    }
    std::fprintf(stderr, "make_dataset: packed into LMDB %s\n", db.c_str());
  }
  return 0;
}
