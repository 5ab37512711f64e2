// The nifti source kind (sources/nifti.h) over nifti_file.h's reader.
#include "server/sources/arrays/nifti.h"

#include <filesystem>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "server/sources/arrays/nifti_file.h"
#include "util/log.h"
#include "util/file_kinds.h"
#include "util/status_macros.h"
#include "util/cache_key.h"

namespace stoker {
namespace {

// Image and label volume of a sample: a manifest line's two files.
constexpr size_t kMostVolumesPerSample = 2;

std::string ShapeText(const std::vector<uint64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

struct Volume {
  std::string path;
  nifti::Header h;
  FileVersion version;
};

struct VolumeSample {
  std::vector<Volume> volumes;  // Image, then label volume.
  int64_t label = 0;
  absl::Status broken;
};

class NiftiSource : public ArraySource {
 public:
  size_t size() const override { return samples_.size(); }
  ElemType type() const override { return type_; }
  const std::vector<uint64_t>& shape(size_t i) const override {
    return samples_[i].broken.ok() ? samples_[i].volumes[0].h.shape : no_shape_;
  }
  int64_t label(size_t i) const override { return samples_[i].label; }
  std::string Name(size_t i) const override { return names_[i]; }
  std::string FileName(size_t i, uint32_t file) const override {
    const VolumeSample& s = samples_[i];
    return file < s.volumes.size() ? s.volumes[file].path : Name(i);
  }
  std::vector<double> Affine(size_t i, uint32_t file) const override {
    const VolumeSample& s = samples_[i];
    if (!s.broken.ok() || file >= s.volumes.size()) return {};
    return {s.volumes[file].h.affine.begin(), s.volumes[file].h.affine.end()};
  }
  absl::Status Broken(size_t i) const override { return samples_[i].broken; }
  uint32_t files() const override { return files_; }

  absl::Status ReadArray(size_t i, uint32_t file, const uint64_t* start, const uint64_t* count,
                         ElemType to, uint8_t* dst) const override {
    const VolumeSample& s = samples_[i];
    if (!s.broken.ok()) return s.broken;
    const Volume& v = s.volumes[file];
    STOKER_ASSIGN_OR_RETURN(Buffer whole, Whole(v));
    if (whole == nullptr) return ReadOversized(v, start, count, to, dst);
    CopyRegion(reinterpret_cast<const uint8_t*>(whole->data()), v.h.type, v.h.shape, start, count,
               dst, to);
    return absl::OkStatus();
  }

  // Built from the kept volume, and kept beside it.
  absl::StatusOr<Foreground> ForegroundOf(size_t i, uint32_t file) const override {
    const VolumeSample& s = samples_[i];
    if (!s.broken.ok()) return s.broken;
    const Volume& v = s.volumes[file];
    auto make = [&]() -> absl::StatusOr<Buffer> {
      STOKER_ASSIGN_OR_RETURN(Buffer whole, Whole(v));
      if (whole != nullptr) {
        return ScanForeground(reinterpret_cast<const uint8_t*>(whole->data()), v.h.type,
                              v.h.volume_bytes / ElemBytes(v.h.type))
            .bytes();
      }
      STOKER_ASSIGN_OR_RETURN(Foreground read, ArraySource::ForegroundOf(i, file));
      return read.bytes();
    };
    if (volumes_ == nullptr) return ArraySource::ForegroundOf(i, file);
    STOKER_ASSIGN_OR_RETURN(Buffer kept, volumes_->Keep(CacheKey({"foreground", Key(v)}), make));
    return Foreground(std::move(kept));
  }

  // The volume cache's key of v (its file version, decoded as nifti).
  static std::string Key(const Volume& v) {
    return CacheKey({"nifti", v.path, v.version.device, v.version.inode, v.version.size,
                     v.version.mtime_ns, v.version.ctime_ns});
  }

  // The decoded volume from the volume cache; null when there is none or
  // the volume cannot fit it.
  absl::StatusOr<Buffer> Whole(const Volume& v) const {
    if (volumes_ == nullptr) return Buffer();
    return volumes_->Get(Key(v), v.h.volume_bytes,
                         [&](const VolumeCache::Parallel& parallel, uint8_t* out) {
                           return nifti::Decode(v.path, beneath_.get(), v.h, v.version, parallel,
                                                out);
                         },
                         owner_);
  }

  // A volume the cache cannot hold: by region from its mapping.
  absl::Status ReadOversized(const Volume& v, const uint64_t* start, const uint64_t* count,
                             ElemType to, uint8_t* dst) const {
    const uint64_t capacity = volumes_ != nullptr ? volumes_->capacity_bytes() : 0;
    std::shared_ptr<const Mapping> map;
    {
      absl::MutexLock lock(&mu_);
      if (warned_.insert(v.path).second) {
        LogWarning(absl::StrCat(v.path, ": its volume (", v.h.volume_bytes,
                                " bytes) is larger than the volume cache (", capacity,
                                " bytes, --volume-cache-bytes): ",
                                v.h.gzip ? "a compressed volume is read whole, so its samples fail"
                                         : "read by region from the file"));
      }
      if (v.h.gzip) {
        return absl::FailedPreconditionError(absl::StrCat(
            v.path, ": its volume (", v.h.volume_bytes, " bytes) is larger than the volume cache (",
            capacity, " bytes); a compressed volume is read whole: raise --volume-cache-bytes "
            "or store it uncompressed (.nii)"));
      }
      std::shared_ptr<const Mapping>& kept = maps_[v.path];
      if (kept == nullptr) {
        STOKER_ASSIGN_OR_RETURN(kept, MapFile(v.path, beneath_.get()));
      }
      map = kept;
    }
    return nifti::ReadRegion(v.path, *map, v.h, start, count, to, dst);
  }

  std::vector<VolumeSample> samples_;
  std::vector<std::string> names_;
  uint32_t files_ = 1;
  ElemType type_ = ElemType::kUint8;
  const std::vector<uint64_t> no_shape_;
  std::shared_ptr<const Beneath> beneath_;
  VolumeCache* volumes_ = nullptr;
  int64_t owner_ = -1;  // Whose decodes they are (VolumeCache::Get).
  mutable absl::Mutex mu_;
  mutable std::set<std::string> warned_ ABSL_GUARDED_BY(mu_);
  mutable std::map<std::string, std::shared_ptr<const Mapping>> maps_ ABSL_GUARDED_BY(mu_);
};

// A file that is not NIfTI at all (so perhaps a manifest), as opposed to a
// NIfTI file with a bad header or one that cannot be opened.
bool NotNifti(const absl::Status& s) {
  return s.code() == absl::StatusCode::kFailedPrecondition &&
         absl::StrContains(s.message(), ": not a NIfTI");
}

// The sample of a manifest line's (or a folder's) files.
VolumeSample OpenSample(const std::vector<std::string>& paths, int64_t label, const Beneath* beneath) {
  VolumeSample s;
  s.label = label;
  for (const std::string& path : paths) {
    Volume v{path, {}, {}};
    absl::StatusOr<nifti::Header> h = nifti::ReadHeader(path, beneath, &v.version);
    if (!h.ok()) {
      s.broken = absl::DataLossError(h.status().message());
      return s;
    }
    v.h = *std::move(h);
    if (!s.volumes.empty() && v.h.shape != s.volumes[0].h.shape) {
      s.broken = absl::DataLossError(absl::StrCat(
          path, ": shape ", ShapeText(v.h.shape), " is not its image's ",
          ShapeText(s.volumes[0].h.shape), " (", s.volumes[0].path, ")"));
      return s;
    }
    s.volumes.push_back(std::move(v));
  }
  return s;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const ArraySource>> OpenNiftiSource(const std::string& path,
                                                                   const std::string& root,
                                                                   const SourceContext& ctx) {
  const Beneath* beneath = ctx.beneath.get();
  std::vector<std::pair<std::vector<std::string>, int32_t>> lines;
  // The manifest's paths as they are built (the names the dataset keeps
  // are charged again by ArrayDataset).
  ListCharge charge(ctx.limits);
  absl::StatusOr<std::vector<std::string>> entries =
      ListFolder(path, beneath, ctx.limits.max_files);
  bool manifest = false;
  if (entries.ok()) {
    for (const std::string& name : *entries) {
      const std::string file = InFolder(path, name);
      if (NiftiName(name) || nifti::ReadHeader(file, beneath, nullptr).ok())
        lines.push_back({{file}, 0});
    }
    if (lines.empty())
      return absl::FailedPreconditionError(
          absl::StrCat(path, " holds no NIfTI volumes (.nii, .nii.gz in any case)"));
  } else if (entries.status().code() == absl::StatusCode::kFailedPrecondition) {
    absl::Status volume = nifti::ReadHeader(path, beneath, nullptr).status();
    if (volume.ok() || (NiftiName(path) && !NotNifti(volume))) {
      STOKER_RETURN_IF_ERROR(volume);
      lines.push_back({{path}, 0});
    } else if (!NotNifti(volume)) {
      return volume;
    } else {
      manifest = true;
      const std::filesystem::path base =
          root.empty() ? std::filesystem::path(path).parent_path() : std::filesystem::path(root);
      STOKER_RETURN_IF_ERROR(ParseManifest(
          path, ctx.limits, kMostVolumesPerSample,
          [&](std::vector<std::string> rel, int32_t label) {
            for (std::string& r : rel) r = (base / r).string();
            Sample paths{rel[0], label, {rel.begin() + 1, rel.end()}};
            STOKER_RETURN_IF_ERROR(charge.Add(paths));
            lines.push_back({std::move(rel), label});
            return absl::OkStatus();
          },
          /*label_optional=*/true));
      if (lines.empty())
        return absl::FailedPreconditionError(
            absl::StrCat("dataset manifest ", path, " lists no samples"));
    }
  } else {
    return entries.status();
  }
  if (!root.empty() && !manifest)
    return absl::InvalidArgumentError(
        absl::StrCat("dataset.nifti.root applies to a manifest, and ", path, " is not one"));
  STOKER_RETURN_IF_ERROR(CheckRows(lines.size(), {}, ctx.limits.max_files, path));
  auto src = std::make_shared<NiftiSource>();
  src->beneath_ = ctx.beneath;
  src->volumes_ = ctx.volumes;
  src->owner_ = ctx.uid;
  src->files_ = static_cast<uint32_t>(lines[0].first.size());
  absl::Status first_broken;
  bool typed = false;
  for (auto& [paths, label] : lines) {
    src->names_.push_back(paths[0]);
    src->samples_.push_back(OpenSample(paths, label, beneath));
    const VolumeSample& s = src->samples_.back();
    if (!s.broken.ok()) {
      if (first_broken.ok()) first_broken = s.broken;
      continue;
    }
    if (!typed) src->type_ = s.volumes[0].h.type;
    typed = true;
  }
  if (!typed)
    return absl::FailedPreconditionError(absl::StrCat(
        path, " holds no readable NIfTI volume (the first: ", first_broken.message(), ")"));
  return std::shared_ptr<const ArraySource>(std::move(src));
}

namespace {

class NiftiKind : public SourceKind {
 public:
  v1::DatasetSpec::SourceCase source_case() const override { return v1::DatasetSpec::kNifti; }
  absl::StatusOr<Dataset> Open(const v1::DatasetSpec& spec,
                               const SourceContext& ctx) const override {
    STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const ArraySource> arrays,
                            OpenNiftiSource(spec.nifti().path(), spec.nifti().root(), ctx));
    return ArrayDataset(std::move(arrays), absl::StrCat("nifti:", spec.nifti().path()),
                        ctx.limits);
  }
};

}  // namespace

STOKER_DEFINE_SOURCE(NiftiSourceKind, NiftiKind)

}  // namespace stoker
