// The hdf5 source kind (sources/hdf5.h): HDF5 datasets as an ArraySource, through
// Debian's libhdf5 (serial, thread-safe build: the library serializes its
// calls, so it is kept off the hot path where it can be): a contiguous,
// unfiltered little-endian dataset is read straight from a read-only
// mapping of its file at the offset HDF5 reports (as an .npy); a chunked or
// compressed one by hyperslab through the library. Files confined to a
// dataset folder are opened through the descriptor openat2 gave
// (/proc/self/fd/N), so HDF5 never resolves a path itself; a dataset whose
// data would come from another file (external storage, an external link, a
// virtual dataset) is refused, external links are never traversed, and
// filter plugins are never loaded.
#include "server/sources/hdf5.h"

#include <fcntl.h>
#include <unistd.h>

#include <hdf5/serial/H5PLpublic.h>
#include <hdf5/serial/hdf5.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/sources/source.h"
#include "util/status_macros.h"
#include "server/file_system.h"
#include "util/checked_math.h"

namespace stoker {
namespace {

// Closes an HDF5 id with the matching function.
class Id {
 public:
  Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Id() {
    if (id_ >= 0) close_(id_);
  }
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

absl::Status Failed(const std::string& file, const std::string& what) {
  return absl::FailedPreconditionError(absl::StrCat(file, ": ", what));
}

absl::StatusOr<ElemType> TypeOf(hid_t dtype, const std::string& file) {
  const H5T_class_t cls = H5Tget_class(dtype);
  const size_t size = H5Tget_size(dtype);
  if (cls == H5T_FLOAT) {
    if (size == 2) return ElemType::kFloat16;
    if (size == 4) return ElemType::kFloat32;
    if (size == 8) return ElemType::kFloat64;
  } else if (cls == H5T_INTEGER) {
    const bool sign = H5Tget_sign(dtype) == H5T_SGN_2;
    switch (size) {
      case 1: return sign ? ElemType::kInt8 : ElemType::kUint8;
      case 2: return sign ? ElemType::kInt16 : ElemType::kUint16;
      case 4: return sign ? ElemType::kInt32 : ElemType::kUint32;
      case 8: return sign ? ElemType::kInt64 : ElemType::kUint64;
    }
  }
  return Failed(file, "the dataset's elements are not plain numbers");
}

hid_t MemType(ElemType t) {
  switch (t) {
    case ElemType::kBool:
    case ElemType::kUint8: return H5T_NATIVE_UINT8;
    case ElemType::kInt8: return H5T_NATIVE_INT8;
    case ElemType::kInt16: return H5T_NATIVE_INT16;
    case ElemType::kUint16: return H5T_NATIVE_UINT16;
    case ElemType::kInt32: return H5T_NATIVE_INT32;
    case ElemType::kUint32: return H5T_NATIVE_UINT32;
    case ElemType::kInt64: return H5T_NATIVE_INT64;
    case ElemType::kUint64: return H5T_NATIVE_UINT64;
    case ElemType::kFloat16: return -1;  // No native half: read as float.
    case ElemType::kFloat32: return H5T_NATIVE_FLOAT;
    case ElemType::kFloat64: return H5T_NATIVE_DOUBLE;
  }
  return -1;
}

// External links are never followed: HDF5 would open their file by path,
// outside the confinement.
herr_t RefuseExternalLink(const char*, const char*, const char*, const char*, unsigned*,
                          hid_t, void*) {
  return -1;
}

// A link/dataset access property list that refuses external links.
hid_t ConfinedAccess() {
  static const hid_t dapl = [] {
    // Filter plugins are shared objects the library would load by name.
    H5PLset_loading_state(0);
    const hid_t p = H5Pcreate(H5P_DATASET_ACCESS);
    H5Pset_elink_cb(p, RefuseExternalLink, nullptr);
    return p;
  }();
  return dapl;
}

absl::Status Refused(const std::string& file, const std::string& name, const char* why) {
  return absl::PermissionDeniedError(absl::StrCat(
      file, ": dataset '", name, "' ", why,
      ": the daemon reads only the file it was given"));
}

// PERMISSION_DENIED when a component of `name` is an external link.
absl::Status CheckLinks(hid_t file, const std::string& name, const std::string& path) {
  std::string prefix;
  for (size_t at = 0; at <= name.size();) {
    size_t slash = name.find('/', at);
    if (slash == std::string::npos) slash = name.size();
    prefix.append(name, at, slash - at);
    at = slash + 1;
    if (!prefix.empty() && prefix != "/") {
      H5L_info_t info;
      if (H5Lget_info(file, prefix.c_str(), &info, ConfinedAccess()) < 0) break;
      if (info.type == H5L_TYPE_EXTERNAL) return Refused(path, name, "is an external link");
    }
    prefix.push_back('/');
  }
  return absl::OkStatus();
}

// An open file, confined when `beneath` is set.
struct File {
  std::string path;
  std::unique_ptr<Id> id;
};

absl::StatusOr<File> OpenFile(const std::string& path, const Beneath* beneath) {
  absl::StatusOr<int> fd = OpenConfined(path, O_RDONLY, beneath);
  if (!fd.ok()) return fd.status();
  // The descriptor names the file openat2 checked; HDF5 reopens that file.
  const std::string via = absl::StrCat("/proc/self/fd/", *fd);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // Errors come back as statuses.
  const hid_t id = H5Fopen(via.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  close(*fd);
  if (id < 0) return Failed(path, "not an HDF5 file (or unreadable)");
  return File{path, std::make_unique<Id>(id, H5Fclose)};
}

struct Dataset5 {
  std::unique_ptr<Id> set, space, type;
  std::vector<uint64_t> dims;
  ElemType elem = ElemType::kUint8;
  // Contiguous, unfiltered, little-endian: its elements at this offset of
  // the file, readable without the library.
  bool raw = false;
  uint64_t offset = 0;
};

absl::StatusOr<Dataset5> OpenSet(const File& f, const std::string& name) {
  Dataset5 d;
  if (absl::Status links = CheckLinks(f.id->get(), name, f.path); !links.ok()) return links;
  d.set = std::make_unique<Id>(H5Dopen2(f.id->get(), name.c_str(), ConfinedAccess()),
                               H5Dclose);
  if (!d.set->ok()) return Failed(f.path, absl::StrCat("has no dataset '", name, "'"));
  {
    Id create(H5Dget_create_plist(d.set->get()), H5Pclose);
    if (!create.ok()) return Failed(f.path, "unreadable dataset");
    if (H5Pget_external_count(create.get()) != 0)
      return Refused(f.path, name, "keeps its data in external files");
    if (H5Pget_layout(create.get()) == H5D_VIRTUAL)
      return Refused(f.path, name, "is a virtual dataset (its data is in other files)");
  }
  d.space = std::make_unique<Id>(H5Dget_space(d.set->get()), H5Sclose);
  d.type = std::make_unique<Id>(H5Dget_type(d.set->get()), H5Tclose);
  if (!d.space->ok() || !d.type->ok()) return Failed(f.path, "unreadable dataset");
  const int nd = H5Sget_simple_extent_ndims(d.space->get());
  if (nd < 0 || nd > static_cast<int>(kMaxArrayDims)) return Failed(f.path, "dataset of an unknown rank");
  std::vector<hsize_t> dims(nd);
  H5Sget_simple_extent_dims(d.space->get(), dims.data(), nullptr);
  d.dims.assign(dims.begin(), dims.end());
  absl::StatusOr<ElemType> t = TypeOf(d.type->get(), f.path);
  if (!t.ok()) return t.status();
  d.elem = *t;
  Id plist(H5Dget_create_plist(d.set->get()), H5Pclose);
  const haddr_t at = H5Dget_offset(d.set->get());
  d.raw = plist.ok() && H5Pget_layout(plist.get()) == H5D_CONTIGUOUS &&
          H5Pget_nfilters(plist.get()) == 0 && at != HADDR_UNDEF &&
          (ElemBytes(d.elem) == 1 || H5Tget_order(d.type->get()) == H5T_ORDER_LE);
  d.offset = at;
  return d;
}

// Reads the hyperslab [start, start + count) of `d` into dst as `to`.
absl::Status ReadSlab(const Dataset5& d, const std::vector<hsize_t>& start,
                      const std::vector<hsize_t>& count, ElemType to,
                      uint8_t* dst, const std::string& what) {
  Id fspace(H5Scopy(d.space->get()), H5Sclose);
  Id mspace(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr),
            H5Sclose);
  if (!fspace.ok() || !mspace.ok() ||
      H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr,
                          count.data(), nullptr) < 0) {
    return absl::DataLossError(absl::StrCat(what, ": bad region"));
  }
  hsize_t n = 1;
  for (hsize_t c : count) n *= c;
  const hid_t mem = MemType(to);
  if (mem < 0) {  // float16: read float32, then narrow.
    std::vector<float> tmp(n);
    if (H5Dread(d.set->get(), H5T_NATIVE_FLOAT, mspace.get(), fspace.get(),
                H5P_DEFAULT, tmp.data()) < 0)
      return absl::DataLossError(absl::StrCat(what, ": HDF5 read failed"));
    const std::vector<uint64_t> shape{n};
    const uint64_t zero = 0, all = n;
    CopyRegion(reinterpret_cast<const uint8_t*>(tmp.data()), ElemType::kFloat32,
               shape, &zero, &all, dst, to);
    return absl::OkStatus();
  }
  if (H5Dread(d.set->get(), mem, mspace.get(), fspace.get(), H5P_DEFAULT, dst) < 0)
    return absl::DataLossError(absl::StrCat(what, ": HDF5 read failed"));
  return absl::OkStatus();
}

class Hdf5Source : public ArraySource {
 public:
  size_t size() const override { return folder_ ? files_.size() : rows_; }
  ElemType type() const override { return elem_; }
  const std::vector<uint64_t>& shape(size_t i) const override {
    return folder_ ? shapes_[i] : row_shape_;
  }
  int64_t label(size_t i) const override { return labels_.empty() ? 0 : labels_[i]; }
  absl::Status Broken(size_t i) const override {
    return broken_.empty() ? absl::OkStatus() : broken_[i];
  }
  std::string Name(size_t i) const override {
    return folder_ ? files_[i] : absl::StrCat(path_, ":", dataset_, "[", i, "]");
  }
  absl::Status Read(size_t i, const uint64_t* start, const uint64_t* count,
                    ElemType to, uint8_t* dst) const override {
    if (absl::Status b = Broken(i); !b.ok()) return b;
    const std::vector<uint64_t>& sh = shape(i);
    uint64_t row = ElemBytes(elem_);
    for (uint64_t d : row_shape_) row *= d;
    if (memory_ != nullptr) {  // Whole dataset in RAM.
      CopyRegion(reinterpret_cast<const uint8_t*>(memory_->data()) + i * row,
                 elem_, sh, start, count, dst, to);
      return absl::OkStatus();
    }
    const Open& o = folder_ ? open_[i] : open_[0];
    if (o.map != nullptr) {  // Contiguous: straight from the mapping.
      return MappedCopyRegion(Name(i), o.map->data + o.set.offset + (folder_ ? 0 : i * row),
                              elem_, sh, start, count, dst, to);
    }
    std::vector<hsize_t> s, c;
    if (folder_) {
      s.assign(start, start + sh.size());
      c.assign(count, count + sh.size());
      return ReadSlab(o.set, s, c, to, dst, files_[i]);
    }
    s.push_back(i);
    c.push_back(1);
    s.insert(s.end(), start, start + sh.size());
    c.insert(c.end(), count, count + sh.size());
    return ReadSlab(o.set, s, c, to, dst, Name(i));
  }

  // One file kept open for reads: its dataset, and a mapping when the
  // dataset is contiguous.
  struct Open {
    File file;
    Dataset5 set;
    std::shared_ptr<const Mapping> map;
  };
  // Keeps `f` and `d` open, mapping the file when `d` is raw and its bytes
  // lie inside it.
  void Keep(File f, Dataset5 d) {
    Open o{std::move(f), std::move(d), nullptr};
    if (o.set.raw) {
      absl::StatusOr<std::shared_ptr<const Mapping>> m = MapFile(o.file.path, beneath_.get());
      absl::StatusOr<uint64_t> bytes =
          CheckedProduct(o.set.dims, ElemBytes(o.set.elem), UINT64_MAX, o.file.path);
      if (m.ok() && bytes.ok() && RangeWithin(o.set.offset, *bytes, (*m)->size)) {
        o.map = Resident(*std::move(m), charge_);
      }
    }
    open_.push_back(std::move(o));
  }

  bool folder_ = false;
  std::string path_, dataset_;
  std::vector<std::string> files_;
  std::vector<std::vector<uint64_t>> shapes_;
  std::vector<uint64_t> row_shape_;
  uint64_t rows_ = 0;
  ElemType elem_ = ElemType::kUint8;
  std::vector<int64_t> labels_;
  std::vector<absl::Status> broken_;  // Folder: per file.
  std::vector<Open> open_;            // Per file (one for a single file).
  ChargeRam charge_;
  std::shared_ptr<void> memory_charge_;  // Holds memory_'s bytes.
  std::shared_ptr<const std::string> memory_;
  std::shared_ptr<const Beneath> beneath_;
};

absl::StatusOr<std::vector<int64_t>> ReadLabels(const File& f, const std::string& name,
                                                size_t n) {
  absl::StatusOr<Dataset5> d = OpenSet(f, name);
  if (!d.ok()) return d.status();
  if (d->dims.size() != 1 || d->dims[0] != n || d->elem == ElemType::kFloat16 ||
      d->elem == ElemType::kFloat32 || d->elem == ElemType::kFloat64) {
    return Failed(f.path, absl::StrCat("labels '", name, "' must be 1-D integers, ",
                                       n, " of them"));
  }
  std::vector<int64_t> out(n);
  absl::Status s = ReadSlab(*d, {0}, {static_cast<hsize_t>(n)}, ElemType::kInt64,
                            reinterpret_cast<uint8_t*>(out.data()), f.path);
  if (!s.ok()) return s;
  return out;
}

// An empty source of `dataset` in `path` (a file or a folder).
std::shared_ptr<Hdf5Source> NewSource(const std::string& path, const std::string& dataset,
                                      const ChargeRam& charge,
                                      std::shared_ptr<const Beneath> beneath) {
  auto src = std::make_shared<Hdf5Source>();
  src->path_ = path;
  src->dataset_ = dataset;
  src->charge_ = charge;
  src->beneath_ = std::move(beneath);
  return src;
}

// One file whose dataset holds rows [N, ...] (src's path_ and dataset_
// set): its rows, labels, and in RAM when `charge` allows a chunked or
// compressed dataset.
absl::StatusOr<std::shared_ptr<const ArraySource>> OpenRows(std::shared_ptr<Hdf5Source> src,
                                                            const std::string& labels,
                                                            uint64_t max_samples) {
  const std::string& path = src->path_;
  const std::string& dataset = src->dataset_;
  const ChargeRam& charge = src->charge_;
  absl::StatusOr<File> f = OpenFile(path, src->beneath_.get());
  if (!f.ok()) return f.status();
  absl::StatusOr<Dataset5> d = OpenSet(*f, dataset);
  if (!d.ok()) return d.status();
  if (d->dims.empty() || d->dims[0] == 0)
    return Failed(path, absl::StrCat("dataset '", dataset,
                                     "' needs a first dimension of samples"));
  src->rows_ = d->dims[0];
  src->row_shape_.assign(d->dims.begin() + 1, d->dims.end());
  src->elem_ = d->elem;
  if (absl::Status n = CheckRows(src->rows_, src->row_shape_, max_samples, path); !n.ok())
    return n;
  absl::StatusOr<uint64_t> all_bytes =
      CheckedProduct(d->dims, ElemBytes(src->elem_), UINT64_MAX, path);
  if (!all_bytes.ok()) return all_bytes.status();
  if (!labels.empty()) {
    absl::StatusOr<std::vector<int64_t>> l = ReadLabels(*f, labels, src->rows_);
    if (!l.ok()) return l.status();
    src->labels_ = *std::move(l);
  }
  const uint64_t bytes = *all_bytes;
  src->Keep(*std::move(f), *std::move(d));
  const Dataset5& set = src->open_[0].set;
  std::shared_ptr<void> token = src->open_[0].map == nullptr && src->elem_ != ElemType::kFloat16 && charge
                                    ? charge(bytes)
                                    : nullptr;
  if (token != nullptr) {
    // Chunked or compressed: one read of everything, not a library call
    // (and its lock) per sample.
    src->memory_charge_ = std::move(token);
    auto all = std::make_shared<std::string>(bytes, '\0');
    std::vector<hsize_t> start(set.dims.size(), 0), count(set.dims.begin(), set.dims.end());
    absl::Status s = ReadSlab(set, start, count, src->elem_,
                              reinterpret_cast<uint8_t*>(all->data()), path);
    if (!s.ok()) return s;
    src->memory_ = std::move(all);
  }
  return std::shared_ptr<const ArraySource>(std::move(src));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const ArraySource>> OpenHdf5Source(
    const std::string& path, const std::string& dataset,
    const std::string& labels, const ChargeRam& charge,
    std::shared_ptr<const Beneath> beneath, uint64_t max_samples, bool rows) {
  if (dataset.empty())
    return absl::InvalidArgumentError("dataset.hdf5.dataset: name the HDF5 dataset");
  auto src = NewSource(path, dataset, charge, beneath);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return absl::NotFoundError(absl::StrCat("dataset ", path, " does not exist"));
  if (std::filesystem::is_directory(path, ec)) {
    src->folder_ = true;
    for (const auto& e : std::filesystem::directory_iterator(path, ec)) {
      const std::string name = e.path().filename().string();
      if ((absl::EndsWithIgnoreCase(name, ".h5") || absl::EndsWithIgnoreCase(name, ".hdf5")) &&
          e.is_regular_file(ec)) {
        src->files_.push_back(e.path().string());
      }
    }
    std::sort(src->files_.begin(), src->files_.end());
    if (src->files_.empty()) return Failed(path, "holds no .h5/.hdf5 files (in any case)");
    if (rows || !labels.empty()) {  // Feature files: rows across files.
      std::vector<std::shared_ptr<const ArraySource>> parts;
      for (const std::string& name : src->files_) {
        absl::StatusOr<std::shared_ptr<const ArraySource>> rows_of =
            OpenRows(NewSource(name, dataset, charge, beneath), labels, max_samples);
        if (!rows_of.ok()) return rows_of.status();
        parts.push_back(*std::move(rows_of));
      }
      return ConcatArrays(std::move(parts), src->files_, max_samples, path);
    }
    if (absl::Status n = CheckRows(src->files_.size(), {}, max_samples, path); !n.ok())
      return n;
    bool typed = false;
    for (const std::string& name : src->files_) {
      absl::StatusOr<File> f = OpenFile(name, beneath.get());
      absl::StatusOr<Dataset5> d =
          f.ok() ? OpenSet(*f, dataset) : absl::StatusOr<Dataset5>(f.status());
      if (!d.ok()) {  // A broken sample, reported when it is read.
        src->broken_.push_back(absl::DataLossError(d.status().message()));
        src->shapes_.emplace_back();
        src->open_.emplace_back();
        continue;
      }
      if (typed && d->elem != src->elem_)
        return Failed(name, "its element type differs from the folder's first file's");
      typed = true;
      src->elem_ = d->elem;
      src->shapes_.push_back(d->dims);
      src->broken_.push_back(absl::OkStatus());
      src->Keep(*std::move(f), *std::move(d));
    }
    if (!typed) return Failed(path, "holds no readable HDF5 file");
    return std::shared_ptr<const ArraySource>(std::move(src));
  }
  return OpenRows(std::move(src), labels, max_samples);
}

namespace {

class Hdf5Kind : public SourceKind {
 public:
  v1::DatasetSpec::SourceCase source_case() const override { return v1::DatasetSpec::kHdf5; }
  absl::StatusOr<Dataset> Open(const v1::DatasetSpec& spec,
                               const SourceContext& ctx) const override {
    const v1::Hdf5Source& h = spec.hdf5();
    STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const ArraySource> arrays,
                            OpenHdf5Source(h.path(), h.dataset(), h.labels(), ctx.charge,
                                           ctx.beneath, ctx.limits.max_files, h.rows()));
    return ArrayDataset(std::move(arrays), absl::StrCat("hdf5:", h.path(), ":", h.dataset()));
  }
};

}  // namespace

STOKER_DEFINE_SOURCE(Hdf5SourceKind, Hdf5Kind)

}  // namespace stoker
