#include "client/cpp/dataset_spec.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "proto/spec.pb.h"
#include "proto/spec_util.h"
#include "util/file_kinds.h"
#include "util/proto_json.h"
#include "util/status_macros.h"

namespace stoker {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// The first bytes of a regular file (fewer when it is shorter or cannot
// be read).
std::string Head(const std::string& path, size_t n) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return "";
  std::string out(n, '\0');
  const ssize_t got = read(fd, out.data(), n);
  close(fd);
  out.resize(got > 0 ? static_cast<size_t>(got) : 0);
  return out;
}

// The array kind a file's name or first bytes say: "npy", "nifti", "hdf5",
// or "" for none of them. A gzip stream says NIfTI only when `gzip_nifti`
// (a path named alone; in a folder, an archive beside class folders is
// not a volume).
std::string ArrayKind(const std::string& path, absl::string_view head, bool gzip_nifti) {
  if (NpyHead(head) || NpyName(path)) return "npy";
  if ((gzip_nifti && GzipHead(head)) || NiftiHead(head) || NiftiName(path)) return "nifti";
  if (Hdf5Head(head) || Hdf5Name(path)) return "hdf5";
  return "";
}

// An HDF5 path needs its dataset's name.
absl::Status NameTheHdf5Dataset(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(
      path, " ", what, ": name the HDF5 dataset that holds the samples, e.g. "
      "{\"hdf5\": {\"path\": \"", path, "\", \"dataset\": \"x\"}}"));
}

// Whether the manifest at `path` lists NIfTI volumes: its first line's
// first column names one.
bool NiftiManifest(const std::string& path) {
  const std::string head = Head(path, 4096);
  for (absl::string_view line : absl::StrSplit(head, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    return NiftiName(line.substr(0, line.find('\t')));
  }
  return false;
}

// The kind of folder `path`: "webdataset" when it holds .tar files and no
// folders; else the array kind of its first file (in name order, of its
// first 4096 entries) whose name or first bytes say one; "" when none does
// (a folder of class folders of images). Only the first 64
// files are opened to look at their bytes: a folder of many pictures is
// not read file by file to be named.
std::string FolderKind(const std::string& path) {
  constexpr size_t kMostOpened = 64;
  std::vector<std::string> files;
  bool folders = false;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(path, ec), end;
       !ec && it != end && files.size() < 4096; it.increment(ec)) {
    if (it->is_regular_file(ec)) files.push_back(it->path().string());
    folders = folders || it->is_directory(ec);
  }
  std::sort(files.begin(), files.end());
  // Shards beside a README, with no class folders.
  if (!folders && std::any_of(files.begin(), files.end(), [](const std::string& f) {
        return absl::EndsWithIgnoreCase(f, ".tar");
      })) {
    return "webdataset";
  }
  for (size_t k = 0; k < files.size(); ++k) {
    const std::string head = k < kMostOpened ? Head(files[k], kKindHeadBytes) : "";
    const std::string kind = ArrayKind(files[k], head, /*gzip_nifti=*/false);
    if (!kind.empty()) return kind;
  }
  return "";
}

// The kind a path names (see the header).
absl::StatusOr<std::string> Recognise(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) {
    const std::string data = absl::StrCat(absl::StripSuffix(path, "/"), "/data.mdb");
    struct stat db {};
    if (stat(data.c_str(), &db) == 0 && S_ISREG(db.st_mode)) return "lmdb";
    const std::string kind = FolderKind(path);
    if (kind == "hdf5") return NameTheHdf5Dataset(path, "holds HDF5 files");
    return kind.empty() ? "folder" : kind;
  }
  if (!S_ISREG(st.st_mode)) return "list";  // The daemon names what it is.
  if (absl::EndsWithIgnoreCase(path, ".tar")) return "webdataset";
  const std::string head = Head(path, kKindHeadBytes);
  if (absl::StartsWith(head, "\xff\xd8\xff") || absl::StartsWith(head, "\x89PNG\r\n") ||
      absl::EndsWithIgnoreCase(path, ".jpg") || absl::EndsWithIgnoreCase(path, ".jpeg") ||
      absl::EndsWithIgnoreCase(path, ".png")) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is one picture, not a dataset: name the folder of class folders it lies in "
              "(<folder>/<class>/<picture>, as ImageFolder reads it), or a manifest of "
              "path<TAB>label lines"));
  }
  const std::string kind = ArrayKind(path, head, /*gzip_nifti=*/true);
  if (kind == "hdf5") return NameTheHdf5Dataset(path, "is an HDF5 file");
  if (!kind.empty()) return kind;
  return NiftiManifest(path) ? "nifti" : "list";
}

// The source message `ds` holds, mutable; null when none is set.
Message* MutableSource(v1::DatasetSpec* ds) {
  const FieldDescriptor* f = ds->GetDescriptor()->FindFieldByNumber(ds->source_case());
  return f == nullptr ? nullptr : ds->GetReflection()->MutableMessage(ds, f);
}

}  // namespace

void MakeDatasetPathsAbsolute(v1::DatasetSpec* ds) {
  Message* source = MutableSource(ds);
  if (source == nullptr) return;
  const google::protobuf::Reflection* r = source->GetReflection();
  const google::protobuf::Descriptor* d = source->GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (!f->options().GetExtension(v1::file_path) || f->is_repeated()) continue;
    const std::string value = r->GetString(*source, f);
    if (value.empty()) continue;
    // An object store's manifest may be an object: its URL, not a path.
    if (ds->has_s3() && f->name() == "manifest" && absl::StartsWith(value, "s3://")) continue;
    std::error_code ec;
    const std::filesystem::path abs = std::filesystem::absolute(value, ec);
    if (ec) continue;
    r->SetString(source, f, abs.lexically_normal().string());
  }
}

absl::StatusOr<v1::DatasetSpec> NameDataset(absl::string_view dataset, const std::string& root) {
  v1::DatasetSpec ds;
  const absl::string_view text = absl::StripLeadingAsciiWhitespace(dataset);
  if (absl::StartsWith(text, "{")) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    // One key names the source; the others are the spec's own fields
    // (samples_per_volume), which JsonToProto checks.
    std::vector<std::string> sources;
    if (j.is_object()) {
      for (const auto& item : j.items()) {
        const FieldDescriptor* f = v1::DatasetSpec::descriptor()->FindFieldByName(item.key());
        if (f != nullptr && f->real_containing_oneof() != nullptr) sources.push_back(item.key());
      }
    }
    if (sources.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a dataset names one source: ", DatasetSourceNames(), ", got ",
          !j.is_object() ? std::string("no JSON object")
          : !sources.empty() ? absl::StrJoin(sources, " and ")
          : j.empty()        ? std::string("none")
                             : absl::StrCat("none (first key '", j.begin().key(), "')")));
    }
    STOKER_RETURN_IF_ERROR(JsonToProto(text, &ds));
  } else {
    if (text.empty()) return absl::InvalidArgumentError("the dataset's path is empty");
    const std::string path(dataset);
    const size_t slash = path.rfind('/');
    if (absl::StartsWith(text, "s3://")) {
      STOKER_RETURN_IF_ERROR(
          JsonToProto(nlohmann::json{{"s3", {{"url", std::string(text)}}}}.dump(), &ds));
    } else if (absl::EndsWithIgnoreCase(path, ".tar") &&
        path.find('{', slash == std::string::npos ? 0 : slash) != std::string::npos) {
      // WebDataset shards by pattern: the folder, and the names in it.
      const std::string dir = slash == std::string::npos ? "."
                              : slash == 0                ? "/"
                                                          : path.substr(0, slash);
      STOKER_RETURN_IF_ERROR(JsonToProto(
          nlohmann::json{{"webdataset", {{"path", dir}, {"shards", path.substr(slash + 1)}}}}
              .dump(),
          &ds));
    } else {
      STOKER_ASSIGN_OR_RETURN(const std::string kind, Recognise(path));
      STOKER_RETURN_IF_ERROR(
          JsonToProto(nlohmann::json{{kind, {{"path", path}}}}.dump(), &ds));
    }
  }
  if (!root.empty()) {
    Message* source = MutableSource(&ds);
    const FieldDescriptor* f = source->GetDescriptor()->FindFieldByName("root");
    const std::string kind = ds.GetDescriptor()->FindFieldByNumber(ds.source_case())->name();
    if (f == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "root applies to a manifest's files, not to a ", kind, " source (", DatasetPath(ds),
          ")"));
    }
    if (source->GetReflection()->GetString(*source, f).empty()) {
      source->GetReflection()->SetString(source, f, root);
    }
  }
  MakeDatasetPathsAbsolute(&ds);
  return ds;
}

}  // namespace stoker
