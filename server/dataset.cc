#include "server/dataset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace stoker {
namespace fs = std::filesystem;

bool HasJpegExtension(const std::string& name) {
  std::string lower = absl::AsciiStrToLower(name);
  return absl::EndsWith(lower, ".jpg") || absl::EndsWith(lower, ".jpeg");
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

// Regular files below `dir`, sorted by path for a stable order.
std::vector<std::string> FilesBelow(const fs::path& dir, std::error_code& ec) {
  std::vector<std::string> files;
  for (fs::recursive_directory_iterator it(
           dir, fs::directory_options::follow_directory_symlink, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec)) files.push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

absl::StatusOr<Dataset> LoadFolderDataset(const std::string& root) {
  if (absl::Status s = CheckFolder(root); !s.ok()) return s;
  Dataset ds;
  ds.description = absl::StrCat("folder:", root);
  std::error_code ec;
  std::vector<fs::path> class_dirs;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_directory(ec)) {
      class_dirs.push_back(it->path());
    } else {
      ++ds.skipped_files;
    }
  }
  if (ec) {
    return absl::InternalError(
        absl::StrCat("listing ", root, ": ", ec.message()));
  }
  std::sort(class_dirs.begin(), class_dirs.end());
  for (const fs::path& dir : class_dirs) {
    const int32_t label = static_cast<int32_t>(ds.class_names.size());
    ds.class_names.push_back(dir.filename().string());
    for (std::string& f : FilesBelow(dir, ec)) {
      if (HasJpegExtension(f)) {
        ds.samples.push_back(Sample{std::move(f), label});
      } else {
        ++ds.skipped_files;
      }
    }
    if (ec) {
      return absl::InternalError(
          absl::StrCat("listing ", dir.string(), ": ", ec.message()));
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

absl::StatusOr<Dataset> LoadListDataset(const std::string& manifest,
                                        const std::string& root) {
  std::error_code ec;
  if (!fs::exists(manifest, ec)) {
    return absl::NotFoundError(
        absl::StrCat("dataset manifest ", manifest, " does not exist"));
  }
  std::ifstream in(manifest);
  if (!in) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open dataset manifest ", manifest));
  }
  const fs::path base =
      root.empty() ? fs::path(manifest).parent_path() : fs::path(root);
  Dataset ds;
  ds.description = absl::StrCat("list:", manifest);
  std::string line;
  int64_t max_label = -1;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    absl::string_view text = absl::StripTrailingAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    std::vector<absl::string_view> parts = absl::StrSplit(text, '\t');
    int32_t label = -1;
    if (parts.size() != 2 || parts[0].empty() ||
        !absl::SimpleAtoi(parts[1], &label) || label < 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "dataset manifest ", manifest, " line ", lineno,
          ": expected 'relative/path<TAB>label' with a label >= 0, got '",
          text, "'"));
    }
    ds.samples.push_back(Sample{(base / std::string(parts[0])).string(), label});
    max_label = std::max<int64_t>(max_label, label);
  }
  if (ds.samples.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("dataset manifest ", manifest, " lists no samples"));
  }
  ds.num_classes = static_cast<uint32_t>(max_label + 1);
  return ds;
}

}  // namespace stoker
