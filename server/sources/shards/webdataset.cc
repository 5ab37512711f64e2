#include "server/sources/shards/webdataset.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "server/dataset/proofs.h"
#include "server/dataset/sample_source.h"
#include "server/sources/source.h"
#include "server/sources/shards/tar_index.h"
#include "util/cache_key.h"
#include "util/status_macros.h"

namespace stoker {
namespace {

class WebDatasetFiles : public SampleSource {
 public:
  struct Shard {
    std::string path;
    FileVersion version;  // As indexed.
  };
  struct Member {
    uint32_t shard;
    bool kept;  // One of WebDatasetSource.members (0 bytes: data).
    uint64_t offset, size;
  };

  WebDatasetFiles(FileSystem* fs, std::shared_ptr<const Beneath> beneath, uint64_t max_bytes,
                  ProofLimits proofs, std::vector<Shard> shards, std::vector<Member> members)
      : fs_(fs),
        beneath_(std::move(beneath)),
        max_bytes_(max_bytes),
        shards_(std::move(shards)),
        members_(std::move(members)),
        proofs_(std::move(proofs)) {}

  // A shard this session opened lately is not opened again (Proofs).
  absl::StatusOr<SourceKey> Identify(const std::string& path) const override {
    STOKER_ASSIGN_OR_RETURN(const Member* m, Find(path));
    if (std::optional<FileVersion> v = proofs_.Find(shards_[m->shard].path)) {
      return KeyOf(*m, *v, nullptr);
    }
    return Opened(*m);
  }
  bool Versioned() const override { return true; }
  bool EmptyIsData(const std::string& path) const override {
    const absl::StatusOr<const Member*> m = Find(path);
    return m.ok() && (*m)->kept;  // Not the picture's or the mask's.
  }
  absl::Status Read(const std::string& path, std::string* out,
                    FileVersion* version) const override {
    STOKER_ASSIGN_OR_RETURN(const Member* m, Find(path));
    STOKER_ASSIGN_OR_RETURN(SourceKey id, Opened(*m));
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
    if (absl::string_view(path).substr(0, hash) != shards_[members_[n].shard].path) {
      return absl::NotFoundError(absl::StrCat("no member ", path, " in this dataset"));
    }
    return &members_[n];
  }

  static SourceKey KeyOf(const Member& m, const FileVersion& v,
                         std::shared_ptr<const OpenFile> opened) {
    SourceKey id{CacheKey({"wds", v.device, v.inode, m.offset, m.size}), v, std::move(opened)};
    id.read_bytes = std::max<uint64_t>(m.size, 1);
    return id;
  }
  // m's shard opened now, checked to be the one indexed, and proven.
  absl::StatusOr<SourceKey> Opened(const Member& m) const {
    const Shard& shard = shards_[m.shard];
    STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const OpenFile> file,
                            fs_->Open(shard.path, beneath_.get()));
    const FileVersion v = file->version();
    if (!v.SameFileAs(shard.version)) {
      return absl::DataLossError(absl::StrCat(
          shard.path, " changed since the dataset was opened (its members' offsets are "
                      "those of the shard indexed then): open the dataset again"));
    }
    proofs_.Add(shard.path, v);
    return KeyOf(m, v, std::move(file));
  }

  FileSystem* const fs_;
  const std::shared_ptr<const Beneath> beneath_;
  const uint64_t max_bytes_;
  const std::vector<Shard> shards_;
  const std::vector<Member> members_;
  mutable Proofs proofs_;
};

// The shards the spec names, made one at a time: count() of them, path(i).
class ShardList {
 public:
  static absl::StatusOr<ShardList> Of(const std::string& path, const std::string& pattern,
                                      const ScanLimits& limits) {
    ShardList list;
    list.dir_ = path;
    while (list.dir_.size() > 1 && list.dir_.back() == '/') list.dir_.pop_back();
    if (!pattern.empty()) {
      STOKER_ASSIGN_OR_RETURN(ShardPattern p, ShardPattern::Parse(pattern, limits.max_files));
      list.pattern_ = std::move(p);
      return list;
    }
    if (absl::EndsWithIgnoreCase(list.dir_, ".tar")) {
      list.paths_ = {list.dir_};
      return list;
    }
    absl::StatusOr<std::vector<std::string>> entries =
        ListFolder(list.dir_, limits.within, limits.max_files);
    if (entries.status().code() == absl::StatusCode::kFailedPrecondition) {
      return ListedIn(list.dir_, limits);  // Not a folder: a file listing them?
    }
    if (!entries.ok()) return entries.status();
    for (const std::string& e : *entries) {
      if (absl::EndsWithIgnoreCase(e, ".tar")) list.paths_.push_back(InFolder(list.dir_, e));
    }
    if (list.paths_.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("WebDataset folder ", list.dir_, " holds no .tar shards"));
    }
    return list;
  }
  uint64_t count() const { return pattern_ ? pattern_->size() : paths_.size(); }
  std::string path(uint64_t i) const {
    return pattern_ ? InFolder(dir_, pattern_->Name(i)) : paths_[i];
  }

 private:
  // The shards the file `file` lists: a .tar name per line (a manifest's
  // lines without labels), relative to the file's folder.
  static absl::StatusOr<ShardList> ListedIn(const std::string& file, const ScanLimits& limits) {
    const size_t slash = file.rfind('/');
    const std::string folder = slash == std::string::npos ? "." : file.substr(0, slash + 1);
    ShardList list;
    uint64_t n = 0;
    STOKER_RETURN_IF_ERROR(ParseManifest(
        file, limits, 1,
        [&](std::vector<std::string> names, int32_t) -> absl::Status {
          ++n;
          if (!absl::EndsWithIgnoreCase(names[0], ".tar")) {
            return absl::FailedPreconditionError(absl::StrCat(
                "WebDataset shard list ", file, ": entry ", n, " names no .tar file"));
          }
          list.paths_.push_back(InFolder(folder, names[0]));
          return absl::OkStatus();
        },
        /*label_optional=*/true));
    if (list.paths_.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("WebDataset shard list ", file, " names no shards"));
    }
    return list;
  }

  std::string dir_;
  std::optional<ShardPattern> pattern_;
  std::vector<std::string> paths_;
};

// A .cls member's label.
absl::StatusOr<int32_t> Label(const OpenFile& file, const std::string& shard,
                              const std::string& key, const WebDatasetSample::Field& f) {
  std::string text(std::min(f.size, kMaxLabelBytes + 1), '\0');
  int err = 0;
  if (!ReadAt(file.fd(), f.offset, text.size(), reinterpret_cast<uint8_t*>(text.data()), &err)) {
    return absl::DataLossError(absl::StrCat(shard, ": ", Shown(key), ".cls could not be read"));
  }
  absl::StatusOr<int32_t> label = ParseLabel(text, key);
  if (!label.ok()) return absl::DataLossError(absl::StrCat(shard, ": ", label.status().message()));
  return label;
}

absl::StatusOr<Dataset> LoadWebDataset(const v1::WebDatasetSource& spec,
                                       const SourceContext& ctx) {
  const std::string& path = spec.path();
  const std::string& pattern = spec.shards();
  const std::vector<std::string> kept(spec.members().begin(), spec.members().end());
  const ScanLimits& limits = ctx.limits;
  STOKER_ASSIGN_OR_RETURN(ShardList list, ShardList::Of(path, pattern, limits));
  Dataset ds;
  ds.description = absl::StrCat("webdataset:", path, pattern.empty() ? "" : "/", pattern);
  std::vector<WebDatasetFiles::Shard> shards;
  std::vector<WebDatasetFiles::Member> members;
  absl::flat_hash_map<std::string, uint32_t> shard_of;
  ListCharge charge(limits);
  const absl::Time deadline = absl::Now() + limits.max_time;
  uint64_t seen = 0;  // Members of every shard, against the caps.
  bool masks = true;
  std::vector<uint64_t> per_shard;  // Samples of each shard.
  if (limits.progress != nullptr) limits.progress->Shards(list.count(), 0);
  for (uint64_t i = 0; i < list.count(); ++i) {
    const std::string shard = list.path(i);
    STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const OpenFile> file,
                            ctx.fs()->Open(shard, limits.within));
    if (!shard_of.emplace(shard, static_cast<uint32_t>(shards.size())).second) continue;
    const uint32_t k = static_cast<uint32_t>(shards.size());
    shards.push_back({shard, file->version()});
    const uint64_t before = ds.samples.size();
    // One sample of the shard, as the grouper finishes it.
    auto take = [&](WebDatasetSample sample) -> absl::Status {
      const auto [image, mask, cls] = FieldsOf(sample);
      if (image == nullptr) {
        ++ds.skipped_files;
        return absl::OkStatus();
      }
      int32_t label = 0;
      if (cls != nullptr) {
        STOKER_ASSIGN_OR_RETURN(label, Label(*file, shard, sample.key, *cls));
      }
      auto name = [&](const WebDatasetSample::Field& f, bool kept = false) {
        members.push_back({k, kept, f.offset, f.size});
        return absl::StrCat(shard, "#", members.size() - 1);
      };
      Sample out{name(*image), label, {}};
      if (mask != nullptr) out.more.push_back(name(*mask));
      masks = masks && mask != nullptr;
      for (const std::string& extension : kept) {  // Absent: 0 bytes of the shard.
        const WebDatasetSample::Field* f = FieldNamed(sample, extension);
        out.more.push_back(f != nullptr ? name(*f, true) : name({extension, 0, 0}, true));
      }
      STOKER_RETURN_IF_ERROR(charge.Add(out));
      ds.samples.push_back(std::move(out));
      return absl::OkStatus();
    };
    WebDatasetGrouper grouper(take);
    absl::Status s = ForEachTarMember(
        [&](uint64_t offset, size_t n, char* out) {
          int err = 0;
          if (ReadAt(file->fd(), offset, n, reinterpret_cast<uint8_t*>(out), &err)) {
            return absl::OkStatus();
          }
          return err == 0 ? absl::DataLossError("the shard is shorter than it was")
                          : absl::InternalError(absl::StrCat("read failed (errno ", err, ")"));
        },
        file->size(), limits.max_files - std::min(seen, limits.max_files),
        [&](TarMember m) -> absl::Status {
          if (++seen % 4096 == 0) {
            if (limits.cancel != nullptr && limits.cancel->load()) {
              return absl::CancelledError("the daemon is shutting down");
            }
            if (absl::Now() > deadline) {
              return absl::DeadlineExceededError(absl::StrCat(
                  "indexing took longer than ", absl::FormatDuration(limits.max_time),
                  " (--dataset-scan-timeout)"));
            }
          }
          return grouper.Add(m);
        });
    if (s.ok()) s = grouper.Finish();
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(shard, ": ", s.message()));
    ds.skipped_files += grouper.skipped();
    per_shard.push_back(ds.samples.size() - before);
    if (limits.progress != nullptr) limits.progress->ShardDone();
  }
  STOKER_RETURN_IF_ERROR(
      FinishShardDataset(absl::StrCat("WebDataset ", ds.description), per_shard, masks, kept,
                         &ds));
  STOKER_RETURN_IF_ERROR(charge.Finish(&ds));
  ds.source = std::make_shared<WebDatasetFiles>(ctx.fs(), ctx.beneath, limits.max_file_bytes,
                                                ctx.Proofs(), std::move(shards),
                                                std::move(members));
  return ds;
}

class WebDatasetKind : public SourceKind {
 public:
  v1::DatasetSpec::SourceCase source_case() const override {
    return v1::DatasetSpec::kWebdataset;
  }
  absl::StatusOr<Dataset> Open(const v1::DatasetSpec& spec,
                               const SourceContext& ctx) const override {
    return LoadWebDataset(spec.webdataset(), ctx);
  }
};

}  // namespace

absl::StatusOr<ShardPattern> ShardPattern::Parse(const std::string& pattern, uint64_t max) {
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard pattern ", Shown(pattern), ": ", why));
  };
  if (pattern.size() > kMaxBytes) {
    return invalid(absl::StrCat("longer than ", kMaxBytes, " bytes"));
  }
  ShardPattern p;
  size_t at = 0;
  while (true) {
    const size_t open = pattern.find('{', at);
    const size_t stray = pattern.find('}', at);
    if (open == std::string::npos) {
      if (stray != std::string::npos) return invalid("a brace closed that was never opened");
      p.text_.push_back(pattern.substr(at));
      break;
    }
    if (stray < open) return invalid("a brace closed that was never opened");
    const size_t close = pattern.find('}', open);
    const size_t dots = pattern.find("..", open);
    Range r;
    uint64_t last = 0;
    if (close == std::string::npos || dots == std::string::npos || dots > close ||
        !absl::SimpleAtoi(pattern.substr(open + 1, dots - open - 1), &r.first) ||
        !absl::SimpleAtoi(pattern.substr(dots + 2, close - dots - 2), &last) ||
        last < r.first) {
      return invalid("a range is {first..last}, two decimal numbers in order");
    }
    if (p.ranges_.size() == kMaxRanges) {
      return invalid(absl::StrCat("more than ", kMaxRanges, " ranges"));
    }
    r.count = last - r.first + 1;  // 0 only for the whole 64-bit span.
    r.width = dots - open - 1;
    if (r.count == 0 || r.count > max || p.size_ > max / r.count) {
      return invalid(absl::StrCat("names more than ", max, " shards"));
    }
    p.size_ *= r.count;
    p.text_.push_back(pattern.substr(at, open - at));
    p.ranges_.push_back(r);
    at = close + 1;
  }
  return p;
}

std::string ShardPattern::Name(uint64_t i) const {
  std::vector<uint64_t> digits(ranges_.size());
  for (size_t k = ranges_.size(); k-- > 0;) {  // The last range varies fastest.
    digits[k] = i % ranges_[k].count;
    i /= ranges_[k].count;
  }
  std::string out = text_[0];
  for (size_t k = 0; k < ranges_.size(); ++k) {
    std::string number = absl::StrCat(ranges_[k].first + digits[k]);
    if (number.size() < ranges_[k].width) number.insert(0, ranges_[k].width - number.size(), '0');
    absl::StrAppend(&out, number, text_[k + 1]);
  }
  return out;
}

STOKER_DEFINE_SOURCE(WebDatasetSourceKind, WebDatasetKind)

size_t WindowOfShard(size_t shard, bool growing) {
  if (!growing) return shard / kShardsPerWindow;
  // Windows 0..3 start at shards 0, 1, 3 and 7; then one every 16 shards.
  size_t w = 0;
  for (size_t start = 0, size = 1; w < 4; ++w, start += size, size *= 2) {
    if (shard < start + size) return w;
  }
  return 4 + (shard - 15) / kShardsPerWindow;
}

absl::Status NoSamplesError(const std::string& what) {
  return absl::FailedPreconditionError(
      absl::StrCat(what, " holds no samples with a jpg, jpeg or png member"));
}

std::vector<std::string> ShardMemberFiles(bool masks, const std::vector<std::string>& kept) {
  std::vector<std::string> files = {""};
  if (masks) files.push_back("seg.png");
  files.insert(files.end(), kept.begin(), kept.end());
  return files;
}

absl::Status FinishShardDataset(const std::string& what, const std::vector<uint64_t>& per_shard,
                                bool masks, const std::vector<std::string>& kept, Dataset* ds,
                                bool growing_windows) {
  if (ds->samples.empty()) return NoSamplesError(what);
  if (!masks) {
    for (Sample& s : ds->samples) {
      if (s.more.size() > kept.size()) s.more.erase(s.more.begin());  // Its mask.
    }
  }
  ds->member_files = ShardMemberFiles(masks, kept);
  ds->files_per_sample = static_cast<uint32_t>(ds->member_files.size());
  ds->num_classes = NumClasses(ds->samples);
  ds->first_epoch_windows.clear();
  for (size_t i = 0; i < per_shard.size(); ++i) {
    if (WindowOfShard(i, growing_windows) == ds->first_epoch_windows.size()) {
      ds->first_epoch_windows.push_back(0);
    }
    ds->first_epoch_windows.back() += per_shard[i];
  }
  return absl::OkStatus();
}

}  // namespace stoker
