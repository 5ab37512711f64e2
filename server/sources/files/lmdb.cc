#include "server/sources/files/lmdb.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/cache/lmdb_env.h"
#include "server/dataset/sample_source.h"
#include "server/sources/source.h"
#include "util/cache_key.h"
#include "util/status_macros.h"

namespace stoker {
namespace fs = std::filesystem;
namespace {

// Values of an LMDB environment; the "path" is the key. `identity` names
// the environment's data file (its device, inode, size and mtime): the
// environment is immutable while open, so entries need no version and are
// not kept in L2.
class LmdbSource : public SampleSource {
 public:
  LmdbSource(std::shared_ptr<const LmdbEnv> env, const FileVersion& data, uint64_t max_bytes)
      : env_(std::move(env)), data_(data), max_bytes_(max_bytes) {}
  absl::StatusOr<SourceKey> Identify(const std::string& path) const override {
    return SourceKey{CacheKey({"lmdb", data_.device, data_.inode, data_.size,
                               uint64_t(data_.mtime_ns), uint64_t(data_.ctime_ns), path}),
                     FileVersion{}};
  }
  bool Versioned() const override { return false; }
  absl::Status Read(const std::string& path, std::string* out,
                    FileVersion*) const override {
    return env_->Get(path, out, max_bytes_);
  }

 private:
  const std::shared_ptr<const LmdbEnv> env_;
  const FileVersion data_;  // The data file's, as opened.
  const uint64_t max_bytes_;
};

}  // namespace

absl::StatusOr<Dataset> LoadLmdbDataset(const std::string& path,
                                        const std::string& manifest,
                                        const ScanLimits& limits) {
  // Confined, the path is a folder when it is the folder the caller proved
  // (spec_util.h's DatasetFolder: a data file's is the folder it is in);
  // its own stat would look outside the confinement.
  absl::string_view dir = path;
  while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
  std::error_code ec;
  const bool folder = limits.within != nullptr ? dir == limits.within->prefix
                                               : fs::is_directory(path, ec);
  const std::string data = folder ? absl::StrCat(dir, "/data.mdb") : path;
  struct stat st;
  absl::StatusOr<int> fd = OpenConfined(data, O_RDONLY, limits.within, &st);
  if (!fd.ok()) {
    return absl::Status(fd.status().code(),
                        absl::StrCat("LMDB dataset ", fd.status().message()));
  }
  LmdbEnv::Options o;
  o.read_only = true;
  o.data_fd = *fd;
  auto env = LmdbEnv::Open(data, o);
  close(*fd);
  if (!env.ok()) return env.status();
  Dataset ds;
  ds.description = absl::StrCat("lmdb:", path);
  const FileVersion v = VersionOf(st);
  ListCharge charge(limits);
  if (!manifest.empty()) {
    absl::Status s = ParseManifest(
        manifest, limits, 1, [&](std::vector<std::string> key, int32_t label) {
          Sample sample{std::move(key[0]), label, {}};
          STOKER_RETURN_IF_ERROR(charge.Add(sample));
          ds.samples.push_back(std::move(sample));
          return absl::OkStatus();
        });
    if (!s.ok()) return s;
    ds.num_classes = NumClasses(ds.samples);
  } else {
    std::vector<std::string> keys;
    absl::Status over;  // The first key past the caps; none kept after it.
    absl::Status s = (*env)->ForEachKey([&](absl::string_view k) {
      if (keys.size() + ds.skipped_files >= limits.max_files) {
        over = absl::ResourceExhaustedError(absl::StrCat(
            "LMDB dataset ", path, " has more than ", limits.max_files,
            " keys (--max-dataset-files)"));
        return false;
      }
      if (k.find('/') == absl::string_view::npos) {
        ++ds.skipped_files;
        return true;
      }
      over = charge.Add(Sample{std::string(k), 0, {}});
      if (over.ok()) keys.emplace_back(k);
      return over.ok();
    });
    if (!s.ok()) return s;
    if (!over.ok()) return over;
    std::vector<std::string> classes;
    for (const std::string& k : keys) classes.push_back(k.substr(0, k.find('/')));
    std::sort(classes.begin(), classes.end());
    classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
    for (std::string& k : keys) {  // LMDB iterates keys in sorted order.
      const std::string cls = k.substr(0, k.find('/'));
      const auto label = std::lower_bound(classes.begin(), classes.end(), cls) -
                         classes.begin();
      ds.samples.push_back(Sample{std::move(k), static_cast<int32_t>(label), {}});
    }
    ds.class_names = std::move(classes);
    ds.num_classes = static_cast<uint32_t>(ds.class_names.size());
  }
  if (ds.samples.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("LMDB dataset ", path, " holds no samples"));
  }
  STOKER_RETURN_IF_ERROR(charge.Finish(&ds));
  ds.source = std::make_shared<LmdbSource>(*std::move(env), v, limits.max_file_bytes);
  return ds;
}

namespace {

class LmdbKind : public SourceKind {
 public:
  v1::DatasetSpec::SourceCase source_case() const override { return v1::DatasetSpec::kLmdb; }
  absl::StatusOr<Dataset> Open(const v1::DatasetSpec& spec,
                               const SourceContext& ctx) const override {
    return LoadLmdbDataset(spec.lmdb().path(), spec.lmdb().manifest(), ctx.limits);
  }
};

}  // namespace

STOKER_DEFINE_SOURCE(LmdbSourceKind, LmdbKind)

}  // namespace stoker
