#include "server/dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <functional>
#include <system_error>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "util/status_macros.h"

namespace stoker {
namespace fs = std::filesystem;

bool HasImageExtension(const std::string& name) {
  std::string lower = absl::AsciiStrToLower(name);
  return absl::EndsWith(lower, ".jpg") || absl::EndsWith(lower, ".jpeg") ||
         absl::EndsWith(lower, ".png");
}

namespace {

absl::Status CheckFolder(const std::string& root) {
  std::error_code ec;
  fs::file_status st = fs::status(root, ec);
  if (ec || !fs::exists(st)) {
    return absl::NotFoundError(
        absl::StrCat("dataset path ", root, " does not exist"));
  }
  if (!fs::is_directory(st)) {
    return absl::FailedPreconditionError(
        absl::StrCat("dataset path ", root, " is not a folder"));
  }
  return absl::OkStatus();
}

// The folder walk's bookkeeping: limits, cancellation and the directories
// on the current path (by device and inode) to recognise a symlink loop.
class Walk {
 public:
  explicit Walk(const ScanLimits& limits)
      : limits_(limits), deadline_(absl::Now() + limits.max_time) {}

  // Regular files below `dir` (following symlinks), sorted by path.
  absl::Status FilesBelow(const fs::path& dir, std::vector<std::string>* out) {
    STOKER_RETURN_IF_ERROR(Enter(dir));
    std::vector<fs::path> subdirs;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
         it.increment(ec)) {
      STOKER_RETURN_IF_ERROR(Tick());
      std::error_code type_ec;
      if (it->is_directory(type_ec)) {
        if (!Inside(*it)) continue;
        subdirs.push_back(it->path());
      } else if (it->is_regular_file(type_ec)) {
        out->push_back(it->path().string());
      }
    }
    if (ec) return ListError(dir, ec);
    std::sort(subdirs.begin(), subdirs.end());
    for (const fs::path& sub : subdirs) {
      STOKER_RETURN_IF_ERROR(FilesBelow(sub, out));
    }
    ancestors_.pop_back();
    return absl::OkStatus();
  }

  // Counts one directory entry against the limits.
  absl::Status Tick() {
    if (++entries_ > limits_.max_files) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "dataset has more than ", limits_.max_files,
          " entries (the daemon's --max-dataset-files)"));
    }
    if (entries_ % 1024 == 0) {
      if (limits_.cancel != nullptr && limits_.cancel->load()) {
        return absl::CancelledError("dataset scan stopped: the daemon is shutting down");
      }
      if (absl::Now() > deadline_) {
        return absl::DeadlineExceededError(absl::StrCat(
            "dataset scan took longer than ",
            absl::FormatDuration(limits_.max_time),
            " (the daemon's --dataset-scan-timeout)"));
      }
    }
    return absl::OkStatus();
  }

  // False for a symlinked folder that leads outside a confined dataset.
  bool Inside(const fs::directory_entry& e) const {
    std::error_code ec;
    if (limits_.beneath.empty() || !e.is_symlink(ec)) return true;
    const fs::path real = fs::canonical(e.path(), ec);
    if (ec) return false;
    const std::string root = fs::canonical(limits_.beneath, ec).string();
    return !ec && absl::StartsWith(real.string(), root + "/");
  }

  static absl::Status ListError(const fs::path& dir, const std::error_code& ec) {
    if (ec == std::errc::permission_denied) {
      return absl::PermissionDeniedError(
          absl::StrCat("the daemon may not read folder ", dir.string()));
    }
    return absl::InternalError(absl::StrCat("listing ", dir.string(), ": ",
                                            ec.message()));
  }

 private:
  absl::Status Enter(const fs::path& dir) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
      return ListError(dir, std::error_code(errno, std::generic_category()));
    }
    for (const auto& [dev, ino, path] : ancestors_) {
      if (dev == st.st_dev && ino == st.st_ino) {
        return absl::FailedPreconditionError(absl::StrCat(
            "dataset folder ", dir.string(), " leads back to ", path,
            " (a symlink loop)"));
      }
    }
    ancestors_.push_back({st.st_dev, st.st_ino, dir.string()});
    return absl::OkStatus();
  }

  const ScanLimits limits_;
  const absl::Time deadline_;
  uint64_t entries_ = 0;
  std::vector<std::tuple<dev_t, ino_t, std::string>> ancestors_;
};

}  // namespace

absl::StatusOr<Dataset> LoadFolderDataset(const std::string& root,
                                          const ScanLimits& limits) {
  if (absl::Status s = CheckFolder(root); !s.ok()) return s;
  Dataset ds;
  ds.description = absl::StrCat("folder:", root);
  Walk walk(limits);
  std::error_code ec;
  std::vector<fs::path> class_dirs;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end;
       it.increment(ec)) {
    STOKER_RETURN_IF_ERROR(walk.Tick());
    std::error_code type_ec;
    if (it->is_directory(type_ec)) {
      class_dirs.push_back(it->path());
    } else {
      ++ds.skipped_files;
    }
  }
  if (ec) return Walk::ListError(root, ec);
  std::sort(class_dirs.begin(), class_dirs.end());
  for (const fs::path& dir : class_dirs) {
    const int32_t label = static_cast<int32_t>(ds.class_names.size());
    ds.class_names.push_back(dir.filename().string());
    std::vector<std::string> files;
    STOKER_RETURN_IF_ERROR(walk.FilesBelow(dir, &files));
    std::sort(files.begin(), files.end());
    for (std::string& f : files) {
      if (HasImageExtension(f)) {
        ds.samples.push_back(Sample{std::move(f), label});
      } else {
        ++ds.skipped_files;
      }
    }
  }
  ds.num_classes = static_cast<uint32_t>(ds.class_names.size());
  if (ds.samples.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dataset ", root, " holds no JPEG samples (", ds.num_classes,
        " class folders, ", ds.skipped_files, " other files)"));
  }
  return ds;
}

namespace {

// Calls fn(relative paths, label) for each `path[<TAB>path...]<TAB>label`
// line of a manifest (every line with the same number of paths, at most
// `max_files`); FAILED_PRECONDITION with the line number for a malformed
// one.
absl::Status ParseManifest(
    const std::string& manifest, const ScanLimits& limits, size_t max_files,
    const std::function<void(std::vector<std::string>, int32_t)>& fn) {
  FileSystem* fs = limits.fs != nullptr ? limits.fs : FileSystem::Default();
  std::string text;
  absl::Status read =
      fs->ReadFile(manifest, &text, nullptr, limits.within, limits.max_file_bytes);
  if (!read.ok()) {
    return absl::Status(read.code(), absl::StrCat("dataset manifest ", read.message()));
  }
  size_t files = 0;  // Of the first sample line.
  uint64_t lineno = 0;
  for (absl::string_view rest = text; !rest.empty();) {
    const size_t eol = rest.find('\n');
    const absl::string_view line = rest.substr(0, eol);
    rest = eol == absl::string_view::npos ? absl::string_view() : rest.substr(eol + 1);
    if (++lineno > limits.max_files || line.size() > limits.max_line_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "dataset manifest ", manifest, " line ", lineno, ": over the daemon's limit of ",
          line.size() > limits.max_line_bytes
              ? absl::StrCat(limits.max_line_bytes, " bytes per line")
              : absl::StrCat(limits.max_files, " lines (--max-dataset-files)")));
    }
    absl::string_view text = absl::StripTrailingAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    std::vector<absl::string_view> parts = absl::StrSplit(text, '\t');
    int32_t label = -1;
    const bool paths_ok =
        parts.size() >= 2 && parts.size() - 1 <= max_files &&
        std::none_of(parts.begin(), parts.end() - 1,
                     [](absl::string_view p) { return p.empty(); });
    const bool count_ok = files == 0 || parts.size() - 1 == files;
    if (!paths_ok || !count_ok || !absl::SimpleAtoi(parts.back(), &label) ||
        label < 0) {
      // The line itself is never quoted: the daemon may read files the
      // caller cannot, and an error message must not disclose them.
      return absl::FailedPreconditionError(absl::StrCat(
          "dataset manifest ", manifest, " line ", lineno,
          ": expected 'relative/path", max_files > 1 ? "[<TAB>path...]" : "",
          "<TAB>label' with a label >= 0 (",
          !paths_ok   ? absl::StrCat("not 1..", max_files,
                                     " non-empty paths and a label")
          : !count_ok ? absl::StrCat(parts.size() - 1, " paths where the first "
                                     "line has ", files)
                      : "the label is not a number >= 0",
          ")"));
    }
    files = parts.size() - 1;
    fn(std::vector<std::string>(parts.begin(), parts.end() - 1), label);
  }
  return absl::OkStatus();
}

uint32_t NumClasses(const std::vector<Sample>& samples) {
  int64_t max_label = -1;
  for (const Sample& s : samples) max_label = std::max<int64_t>(max_label, s.label);
  return static_cast<uint32_t>(max_label + 1);
}

}  // namespace

absl::StatusOr<Dataset> LoadListDataset(const std::string& manifest,
                                        const std::string& root,
                                        const ScanLimits& limits) {
  const fs::path base =
      root.empty() ? fs::path(manifest).parent_path() : fs::path(root);
  Dataset ds;
  ds.description = absl::StrCat("list:", manifest);
  absl::Status s = ParseManifest(
      manifest, limits, kMaxFilesPerSample,
      [&](std::vector<std::string> rel, int32_t label) {
        Sample sample{(base / rel[0]).string(), label, {}};
        for (size_t k = 1; k < rel.size(); ++k) {
          sample.more.push_back((base / rel[k]).string());
        }
        ds.files_per_sample = static_cast<uint32_t>(rel.size());
        ds.samples.push_back(std::move(sample));
      });
  if (!s.ok()) return s;
  if (ds.samples.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("dataset manifest ", manifest, " lists no samples"));
  }
  ds.num_classes = NumClasses(ds.samples);
  return ds;
}

absl::StatusOr<Dataset> LoadLmdbDataset(const std::string& path,
                                        const std::string& manifest,
                                        const ScanLimits& limits) {
  std::error_code ec;
  const bool folder = limits.within != nullptr || fs::is_directory(path, ec);
  const std::string data = folder ? absl::StrCat(path, "/data.mdb") : path;
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
  ds.lmdb_identity = absl::StrCat(v.device, ":", v.inode, ":", v.size, ":", v.mtime_ns);
  if (!manifest.empty()) {
    absl::Status s = ParseManifest(
        manifest, limits, 1, [&](std::vector<std::string> key, int32_t label) {
          ds.samples.push_back(Sample{std::move(key[0]), label, {}});
        });
    if (!s.ok()) return s;
    ds.num_classes = NumClasses(ds.samples);
  } else {
    std::vector<std::string> keys;
    absl::Status s = (*env)->ForEach([&](absl::string_view k, absl::string_view) {
      if (k.find('/') == absl::string_view::npos) {
        ++ds.skipped_files;
      } else {
        keys.emplace_back(k);
      }
      return true;
    });
    if (!s.ok()) return s;
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
  ds.lmdb = *std::move(env);
  return ds;
}

}  // namespace stoker
