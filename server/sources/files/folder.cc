#include "server/sources/files/folder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
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

bool HasImageExtension(const std::string& name) {
  std::string lower = absl::AsciiStrToLower(name);
  return absl::EndsWith(lower, ".jpg") || absl::EndsWith(lower, ".jpeg") ||
         absl::EndsWith(lower, ".png");
}

namespace {

// The folder walk: listings through the caller's confinement (each folder
// opened by the caller's side, ListFolderEntries), its limits and
// cancellation, and the folders on the current path (by device and inode)
// to recognise a symlink loop.
class Walk {
 public:
  explicit Walk(const ScanLimits& limits)
      : limits_(limits), deadline_(absl::Now() + limits.max_time) {}

  // The entries of `dir`, counted against the limits, and the folder
  // entered (popped by Leave).
  absl::StatusOr<std::vector<FolderEntry>> Enter(const std::string& dir) {
    struct stat st {};
    const uint64_t left = limits_.max_files > entries_ ? limits_.max_files - entries_ : 0;
    absl::StatusOr<std::vector<FolderEntry>> entries =
        ListFolderEntries(dir, limits_.within, left, &st);
    if (!entries.ok()) return Named(dir, entries.status());
    for (const auto& [dev, ino, path] : ancestors_) {
      if (dev == st.st_dev && ino == st.st_ino) {
        return absl::FailedPreconditionError(absl::StrCat(
            "dataset folder ", dir, " leads back to ", path, " (a symlink loop)"));
      }
    }
    ancestors_.push_back({st.st_dev, st.st_ino, dir});
    for (size_t i = 0; i < entries->size(); ++i) STOKER_RETURN_IF_ERROR(Tick());
    return entries;
  }
  void Leave() { ancestors_.pop_back(); }

  // Regular files below `dir`, symlinks followed as the caller's own opens
  // follow them (one an earlier client refused as leading out is listed,
  // and its read refused).
  absl::Status FilesBelow(const std::string& dir, std::vector<std::string>* out) {
    STOKER_ASSIGN_OR_RETURN(std::vector<FolderEntry> entries, Enter(dir));
    for (const FolderEntry& e : entries) {
      if (e.kind == FolderEntry::kFolder) {
        STOKER_RETURN_IF_ERROR(FilesBelow(InFolder(dir, e.name), out));
      } else if (e.kind == FolderEntry::kFile || e.kind == FolderEntry::kOutside) {
        out->push_back(InFolder(dir, e.name));
      }
    }
    Leave();
    return absl::OkStatus();
  }

 private:
  // Counts one directory entry against the limits.
  absl::Status Tick() {
    if (++entries_ > limits_.max_files) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "dataset has more than ", limits_.max_files,
          " entries (the daemon's --max-dataset-files)"));
    }
    if (entries_ % 1024 == 0) {
      if (limits_.progress != nullptr) limits_.progress->Listed(1024);
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

  // A listing's error in the dataset's words.
  absl::Status Named(const std::string& dir, const absl::Status& s) const {
    switch (s.code()) {
      case absl::StatusCode::kNotFound:
        return absl::NotFoundError(absl::StrCat("dataset path ", dir, " does not exist"));
      case absl::StatusCode::kFailedPrecondition:
        return absl::FailedPreconditionError(
            absl::StrCat("dataset path ", dir, " is not a folder"));
      case absl::StatusCode::kPermissionDenied:
        return absl::PermissionDeniedError(absl::StrCat("may not read folder ", dir, " (",
                                                        s.message(), ")"));
      case absl::StatusCode::kResourceExhausted:
        return absl::ResourceExhaustedError(absl::StrCat(
            "dataset has more than ", limits_.max_files,
            " entries (the daemon's --max-dataset-files)"));
      default:
        return s;
    }
  }

  const ScanLimits limits_;
  const absl::Time deadline_;
  uint64_t entries_ = 0;
  std::vector<std::tuple<dev_t, ino_t, std::string>> ancestors_;
};

}  // namespace

absl::StatusOr<Dataset> LoadFolderDataset(const std::string& root,
                                          const ScanLimits& limits) {
  Dataset ds;
  ds.description = absl::StrCat("folder:", root);
  ListCharge charge(limits);
  Walk walk(limits);
  STOKER_ASSIGN_OR_RETURN(std::vector<FolderEntry> top, walk.Enter(root));
  uint64_t top_images = 0;  // Image files beside the class folders.
  for (const FolderEntry& e : top) {
    if (e.kind != FolderEntry::kFolder) {
      ++ds.skipped_files;
      if (e.kind == FolderEntry::kFile && HasImageExtension(e.name)) ++top_images;
      continue;
    }
    const int32_t label = static_cast<int32_t>(ds.class_names.size());
    ds.class_names.push_back(e.name);
    std::vector<std::string> files;
    STOKER_RETURN_IF_ERROR(walk.FilesBelow(InFolder(root, e.name), &files));
    // As ImageFolder orders them: by folder, then by name in it.
    std::sort(files.begin(), files.end(), [](const std::string& a, const std::string& b) {
      auto split = [](const std::string& p) {
        const size_t slash = std::min(p.rfind('/'), p.size());
        return std::make_pair(absl::string_view(p).substr(0, slash),
                              absl::string_view(p).substr(slash));
      };
      return split(a) < split(b);
    });
    for (std::string& f : files) {
      if (HasImageExtension(f)) {
        Sample sample{std::move(f), label};
        STOKER_RETURN_IF_ERROR(charge.Add(sample));
        ds.samples.push_back(std::move(sample));
      } else {
        ++ds.skipped_files;
      }
    }
  }
  ds.num_classes = static_cast<uint32_t>(ds.class_names.size());
  STOKER_RETURN_IF_ERROR(charge.Finish(&ds));
  if (ds.samples.empty() && ds.num_classes == 0 && top_images > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dataset ", root, " has no class folders but ", top_images,
        " images at its top: a folder dataset is read as ImageFolder reads one, ", root,
        "/<class>/<image>; put unlabeled images in one folder below it, or list them in a "
        "manifest (path<TAB>label lines: the `list` source)"));
  }
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
