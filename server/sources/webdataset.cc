#include "server/sources/webdataset.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/dataset/sample_source.h"
#include "server/sources/source.h"
#include "server/sources/tar_index.h"
#include "util/cache_key.h"
#include "util/status_macros.h"

namespace stoker {
namespace {

bool SameFile(const FileVersion& a, const FileVersion& b) {
  return a.device == b.device && a.inode == b.inode && a.size == b.size &&
         a.mtime_ns == b.mtime_ns && a.ctime_ns == b.ctime_ns;
}

class WebDatasetFiles : public SampleSource {
 public:
  struct Shard {
    std::string path;
    FileVersion version;  // As indexed.
  };
  struct Member {
    uint32_t shard;
    uint64_t offset, size;
  };

  WebDatasetFiles(FileSystem* fs, std::shared_ptr<const Beneath> beneath, uint64_t max_bytes,
                  std::vector<Shard> shards, std::vector<Member> members,
                  absl::flat_hash_map<std::string, uint32_t> shard_of)
      : fs_(fs),
        beneath_(std::move(beneath)),
        max_bytes_(max_bytes),
        shards_(std::move(shards)),
        members_(std::move(members)),
        shard_of_(std::move(shard_of)) {}

  absl::StatusOr<SourceKey> Identify(const std::string& path) const override {
    STOKER_ASSIGN_OR_RETURN(const Member* m, Find(path));
    const Shard& shard = shards_[m->shard];
    STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const OpenFile> file,
                            fs_->Open(shard.path, beneath_.get()));
    const FileVersion v = file->version();
    if (!SameFile(v, shard.version)) {
      return absl::DataLossError(absl::StrCat(
          shard.path, " changed since the dataset was opened (its members' offsets are "
                      "those of the shard indexed then): open the dataset again"));
    }
    return SourceKey{CacheKey({"wds", v.device, v.inode, m->offset, m->size}), v,
                     std::move(file)};
  }
  bool Versioned() const override { return true; }
  absl::Status Read(const std::string& path, std::string* out,
                    FileVersion* version) const override {
    STOKER_ASSIGN_OR_RETURN(SourceKey id, Identify(path));
    return ReadIdentified(id, path, out, version);
  }
  absl::Status ReadIdentified(const SourceKey& id, const std::string& path, std::string* out,
                              FileVersion* version) const override {
    if (id.opened == nullptr) return Read(path, out, version);
    STOKER_ASSIGN_OR_RETURN(const Member* m, Find(path));
    if (m->size > max_bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          path, " is ", m->size, " bytes, over the cap of ", max_bytes_, " per file"));
    }
    out->resize(m->size);
    int err = 0;
    if (!ReadAt(id.opened->fd(), m->offset, m->size, reinterpret_cast<uint8_t*>(out->data()),
                &err)) {
      return err == 0 ? absl::DataLossError(absl::StrCat(path, ": the shard is shorter now"))
                      : absl::InternalError(absl::StrCat(path, ": read failed (errno ", err,
                                                         ")"));
    }
    if (version != nullptr) *version = id.version;
    return absl::OkStatus();
  }

 private:
  // The member "<shard>#<n>" names.
  absl::StatusOr<const Member*> Find(const std::string& path) const {
    const size_t hash = path.rfind('#');
    uint64_t n = 0;
    if (hash == std::string::npos || !absl::SimpleAtoi(path.substr(hash + 1), &n) ||
        n >= members_.size()) {
      return absl::NotFoundError(absl::StrCat("no member ", path, " in this dataset"));
    }
    const auto shard = shard_of_.find(path.substr(0, hash));
    if (shard == shard_of_.end() || shard->second != members_[n].shard) {
      return absl::NotFoundError(absl::StrCat("no member ", path, " in this dataset"));
    }
    return &members_[n];
  }

  FileSystem* const fs_;
  const std::shared_ptr<const Beneath> beneath_;
  const uint64_t max_bytes_;
  const std::vector<Shard> shards_;
  const std::vector<Member> members_;
  const absl::flat_hash_map<std::string, uint32_t> shard_of_;
};

bool IsImage(const std::string& extension) {
  return extension == "jpg" || extension == "jpeg" || extension == "png";
}

// The shards' paths the spec names.
absl::StatusOr<std::vector<std::string>> ShardPaths(const std::string& path,
                                                    const std::string& pattern,
                                                    const ScanLimits& limits) {
  std::string dir = path;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (!pattern.empty()) {
    STOKER_ASSIGN_OR_RETURN(std::vector<std::string> names,
                            ExpandShardPattern(pattern, limits.max_files));
    for (std::string& n : names) n = InFolder(dir, n);
    return names;
  }
  if (absl::EndsWithIgnoreCase(dir, ".tar")) return std::vector<std::string>{dir};
  STOKER_ASSIGN_OR_RETURN(std::vector<std::string> entries,
                          ListFolder(dir, limits.within, limits.max_files));
  std::vector<std::string> shards;
  for (const std::string& e : entries) {
    if (absl::EndsWithIgnoreCase(e, ".tar")) shards.push_back(InFolder(dir, e));
  }
  if (shards.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("WebDataset folder ", dir, " holds no .tar shards"));
  }
  return shards;
}

// A .cls member's label.
absl::StatusOr<int32_t> Label(const OpenFile& file, const std::string& shard,
                              const TarMember& m) {
  std::string text(std::min<uint64_t>(m.size, 32), '\0');
  int err = 0;
  if (m.size > 32 ||
      !ReadAt(file.fd(), m.offset, text.size(), reinterpret_cast<uint8_t*>(text.data()), &err)) {
    return absl::DataLossError(
        absl::StrCat(shard, ": ", m.name, " is not a label (", m.size, " bytes)"));
  }
  int32_t label = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &label) || label < 0) {
    return absl::DataLossError(
        absl::StrCat(shard, ": ", m.name, " holds no non-negative integer label"));
  }
  return label;
}

absl::StatusOr<Dataset> LoadWebDataset(const std::string& path, const std::string& pattern,
                                       const SourceContext& ctx) {
  const ScanLimits& limits = ctx.limits;
  STOKER_ASSIGN_OR_RETURN(std::vector<std::string> paths, ShardPaths(path, pattern, limits));
  Dataset ds;
  ds.description = absl::StrCat("webdataset:", path, pattern.empty() ? "" : "/", pattern);
  std::vector<WebDatasetFiles::Shard> shards;
  std::vector<WebDatasetFiles::Member> members;
  absl::flat_hash_map<std::string, uint32_t> shard_of;
  ListCharge charge(limits);
  bool masks = true;
  for (const std::string& shard : paths) {
    if (limits.cancel != nullptr && limits.cancel->load()) {
      return absl::CancelledError("the daemon is shutting down");
    }
    STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const OpenFile> file,
                            ctx.fs()->Open(shard, limits.within));
    std::vector<TarMember> index;
    absl::Status s = ReadTarIndex(
        [&](uint64_t offset, size_t n, char* out) {
          int err = 0;
          if (ReadAt(file->fd(), offset, n, reinterpret_cast<uint8_t*>(out), &err)) {
            return absl::OkStatus();
          }
          return absl::DataLossError(absl::StrCat("the shard is shorter than it was (errno ",
                                                  err, ")"));
        },
        file->size(), limits.max_files - std::min<uint64_t>(members.size(), limits.max_files),
        &index);
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(shard, ": ", s.message()));
    if (!shard_of.emplace(shard, static_cast<uint32_t>(shards.size())).second) continue;
    const uint32_t k = static_cast<uint32_t>(shards.size());
    shards.push_back({shard, file->version()});
    for (const WebDatasetSample& sample : GroupWebDataset(index)) {
      const TarMember* image = nullptr;
      const TarMember* mask = nullptr;
      int32_t label = 0;
      for (const WebDatasetSample::Field& f : sample.fields) {
        const TarMember& m = index[f.member];
        if (IsImage(f.extension) && image == nullptr) {
          image = &m;
        } else if (f.extension == "seg.png") {
          mask = &m;
        } else if (f.extension == "cls") {
          STOKER_ASSIGN_OR_RETURN(label, Label(*file, shard, m));
        }
      }
      if (image == nullptr) {
        ++ds.skipped_files;
        continue;
      }
      auto name = [&](const TarMember& m) {
        members.push_back({k, m.offset, m.size});
        return absl::StrCat(shard, "#", members.size() - 1);
      };
      Sample out{name(*image), label, {}};
      if (mask != nullptr) out.more.push_back(name(*mask));
      masks = masks && mask != nullptr;
      STOKER_RETURN_IF_ERROR(charge.Add(out));
      ds.samples.push_back(std::move(out));
    }
  }
  if (ds.samples.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "WebDataset ", ds.description, " holds no samples with a jpg, jpeg or png member"));
  }
  if (masks) {
    ds.files_per_sample = 2;
  } else {
    for (Sample& s : ds.samples) s.more.clear();
  }
  ds.num_classes = NumClasses(ds.samples);
  STOKER_RETURN_IF_ERROR(charge.Finish(&ds));
  ds.source = std::make_shared<WebDatasetFiles>(ctx.fs(), ctx.beneath, limits.max_file_bytes,
                                                std::move(shards), std::move(members),
                                                std::move(shard_of));
  return ds;
}

class WebDatasetKind : public SourceKind {
 public:
  v1::DatasetSpec::SourceCase source_case() const override {
    return v1::DatasetSpec::kWebdataset;
  }
  absl::StatusOr<Dataset> Open(const v1::DatasetSpec& spec,
                               const SourceContext& ctx) const override {
    return LoadWebDataset(spec.webdataset().path(), spec.webdataset().shards(), ctx);
  }
};

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandShardPattern(const std::string& pattern,
                                                            uint64_t max) {
  const size_t open = pattern.find('{');
  if (open == std::string::npos) {
    if (pattern.find('}') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("shard pattern ", pattern,
                                                     " closes a brace it never opened"));
    }
    return std::vector<std::string>{pattern};
  }
  const size_t close = pattern.find('}', open);
  const size_t dots = pattern.find("..", open);
  uint64_t first = 0, last = 0;
  if (close == std::string::npos || dots == std::string::npos || dots > close ||
      !absl::SimpleAtoi(pattern.substr(open + 1, dots - open - 1), &first) ||
      !absl::SimpleAtoi(pattern.substr(dots + 2, close - dots - 2), &last) || last < first) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard pattern ", pattern, ": a range is {first..last}, two decimal numbers in order"));
  }
  const size_t width = dots - open - 1;
  if (last - first >= max) {
    return absl::InvalidArgumentError(absl::StrCat("shard pattern ", pattern, " names more than ",
                                                   max, " shards"));
  }
  STOKER_ASSIGN_OR_RETURN(std::vector<std::string> rests,
                          ExpandShardPattern(pattern.substr(close + 1), max));
  std::vector<std::string> out;
  for (uint64_t n = first; n <= last; ++n) {
    std::string number = absl::StrCat(n);
    if (number.size() < width) number.insert(0, width - number.size(), '0');
    for (const std::string& rest : rests) {
      if (out.size() >= max) {
        return absl::InvalidArgumentError(absl::StrCat("shard pattern ", pattern,
                                                       " names more than ", max, " shards"));
      }
      out.push_back(absl::StrCat(pattern.substr(0, open), number, rest));
    }
  }
  return out;
}

STOKER_DEFINE_SOURCE(WebDatasetSourceKind, WebDatasetKind)

}  // namespace stoker
