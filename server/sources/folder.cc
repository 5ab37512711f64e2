#include "server/sources/folder.h"

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

#include "server/sources/source.h"

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

class FolderKind : public SourceKind {
 public:
  v1::DatasetSpec::SourceCase source_case() const override { return v1::DatasetSpec::kFolder; }
  absl::StatusOr<Dataset> Open(const v1::DatasetSpec& spec,
                               const SourceContext& ctx) const override {
    STOKER_ASSIGN_OR_RETURN(Dataset ds, LoadFolderDataset(spec.folder().path(), ctx.limits));
    ds.source = ctx.Files();
    return ds;
  }
};

}  // namespace

STOKER_DEFINE_SOURCE(FolderSourceKind, FolderKind)

}  // namespace stoker
