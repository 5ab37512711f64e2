#include "server/dataset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
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

namespace {

// Calls fn(relative path, label) for each `path<TAB>label` line of a
// manifest; FAILED_PRECONDITION with the line number for a malformed one.
absl::Status ParseManifest(
    const std::string& manifest,
    const std::function<void(std::string, int32_t)>& fn) {
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
  std::string line;
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
    fn(std::string(parts[0]), label);
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
                                        const std::string& root) {
  const fs::path base =
      root.empty() ? fs::path(manifest).parent_path() : fs::path(root);
  Dataset ds;
  ds.description = absl::StrCat("list:", manifest);
  absl::Status s = ParseManifest(manifest, [&](std::string rel, int32_t label) {
    ds.samples.push_back(Sample{(base / rel).string(), label});
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
                                        const std::string& manifest) {
  LmdbEnv::Options o;
  o.read_only = true;
  auto env = LmdbEnv::Open(path, o);
  if (!env.ok()) return env.status();
  Dataset ds;
  ds.description = absl::StrCat("lmdb:", path);
  if (!manifest.empty()) {
    absl::Status s = ParseManifest(manifest, [&](std::string key, int32_t label) {
      ds.samples.push_back(Sample{std::move(key), label});
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
      ds.samples.push_back(Sample{std::move(k), static_cast<int32_t>(label)});
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
