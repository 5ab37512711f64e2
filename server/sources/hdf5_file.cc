#include "server/sources/hdf5_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5/serial/H5PLpublic.h>
#include <libdeflate.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "util/checked_math.h"
#include "util/status_macros.h"
#include "util/cache_key.h"

namespace stoker {
namespace h5 {

absl::Status Failed(const std::string& file, const std::string& what) {
  return absl::FailedPreconditionError(absl::StrCat(file, ": ", what));
}

namespace {

// Library errors on the calling thread, for one call of ours: never
// printed, and cleared when it returns. The thread-safe library keeps an
// error stack per thread and frees its messages only when cleared, so a
// decode thread that ended holding one would leak it.
class ErrorScope {
 public:
  ErrorScope() {
    thread_local const bool quiet = H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr) >= 0;
    (void)quiet;
  }
  ~ErrorScope() { H5Eclear2(H5E_DEFAULT); }
  ErrorScope(const ErrorScope&) = delete;
  ErrorScope& operator=(const ErrorScope&) = delete;
};

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

}  // namespace

absl::StatusOr<File> OpenFile(const std::string& path, const Beneath* beneath) {
  ErrorScope errors;
  absl::StatusOr<std::shared_ptr<void>> held = ChargeHeld(beneath, path);
  if (!held.ok()) return held.status();
  absl::StatusOr<int> fd = OpenConfined(path, O_RDONLY, beneath);
  if (!fd.ok()) return fd.status();
  // The descriptor names the file openat2 checked; HDF5 reopens that file.
  struct stat st;
  if (fstat(*fd, &st) != 0) {
    close(*fd);
    return Failed(path, "cannot be stat'ed");
  }
  const FileVersion v = VersionOf(st);
  const std::string version =
      CacheKey({path, v.device, v.inode, v.size, v.mtime_ns, v.ctime_ns});
  const std::string via = absl::StrCat("/proc/self/fd/", *fd);
  const hid_t id = H5Fopen(via.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  close(*fd);
  if (id < 0) return Failed(path, "not an HDF5 file (or unreadable)");
  return File{path, version, std::make_unique<Id>(id, H5Fclose), *std::move(held)};
}

absl::StatusOr<Set> OpenSet(const File& f, const std::string& name) {
  ErrorScope errors;
  Set d;
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
  if (plist.ok() && H5Pget_layout(plist.get()) == H5D_CHUNKED) {
    hsize_t chunk[kMaxArrayDims];
    const int rank = H5Pget_chunk(plist.get(), static_cast<int>(kMaxArrayDims), chunk);
    if (rank != static_cast<int>(d.dims.size()))
      return Failed(f.path, "a chunked dataset of an unknown chunk rank");
    d.chunk.assign(chunk, chunk + rank);
    bool known = true;
    for (int k = 0, n = H5Pget_nfilters(plist.get()); k < n; ++k) {
      unsigned flags = 0, config = 0;
      size_t values = 0;
      const H5Z_filter_t id =
          H5Pget_filter2(plist.get(), k, &flags, &values, nullptr, 0, nullptr, &config);
      known = known && (id == H5Z_FILTER_DEFLATE || id == H5Z_FILTER_SHUFFLE);
      d.filters.push_back(id);
    }
    d.inflatable = known && (ElemBytes(d.elem) == 1 || H5Tget_order(d.type->get()) == H5T_ORDER_LE);
  }
  return d;
}

// Reads the hyperslab [start, start + count) of `d` into dst as `to`.
absl::Status ReadSlab(const Set& d, const std::vector<hsize_t>& start,
                      const std::vector<hsize_t>& count, ElemType to,
                      uint8_t* dst, const std::string& what) {
  ErrorScope errors;
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


namespace {

// Most bytes a stored chunk may claim: its inflated size, plus deflate's
// worst-case growth (a stored block header per 16 KiB, the zlib frame).
uint64_t MostStored(uint64_t chunk_bytes) { return chunk_bytes + chunk_bytes / 1024 + 4096; }

// Undoes HDF5's shuffle filter: `in` holds byte 0 of every element, then
// byte 1, ...; bytes past the last whole element stay where they are.
void Unshuffle(const uint8_t* in, size_t bytes, int elem, uint8_t* out) {
  const size_t n = bytes / elem;
  for (int b = 0; b < elem; ++b) {
    const uint8_t* from = in + b * n;
    for (size_t i = 0; i < n; ++i) out[i * elem + b] = from[i];
  }
  std::memcpy(out + n * elem, in + n * elem, bytes - n * elem);
}

// Per thread: a zlib inflater.
struct Inflater {
  libdeflate_decompressor* d = libdeflate_alloc_decompressor();
  ~Inflater() { libdeflate_free_decompressor(d); }
};

// Largest chunk ReadWhole takes: a chunk may exceed its dataset (extendible
// ones), but not so far that each thread's buffers dwarf the volume.
constexpr uint64_t kMostChunkBytes = 64ULL << 20;

// An uninitialised buffer of `n` bytes, freed when the chunk is done.
std::unique_ptr<uint8_t[]> Scratch(uint64_t n) { return std::unique_ptr<uint8_t[]>(new uint8_t[n]); }

}  // namespace

absl::StatusOr<Chunks> Chunks::Of(const Set& d, const std::string& what) {
  if (!d.inflatable || d.dims.empty())
    return absl::FailedPreconditionError(absl::StrCat(what, ": not read chunk by chunk"));
  Chunks c;
  c.set_ = d.set->get();
  c.dims_ = d.dims;
  c.chunk_ = d.chunk;
  c.filters_ = d.filters;
  c.what_ = what;
  c.type_ = d.elem;
  c.elem_ = ElemBytes(d.elem);
  const size_t nd = d.dims.size();
  STOKER_ASSIGN_OR_RETURN(c.chunk_bytes_,
                          CheckedProduct(d.chunk, c.elem_, uint64_t{1} << 32, what));
  c.grid_.resize(nd);
  for (size_t k = 0; k < nd; ++k) {
    if (d.chunk[k] == 0) return absl::DataLossError(absl::StrCat(what, ": a chunk dimension is 0"));
    c.grid_[k] = (d.dims[k] + d.chunk[k] - 1) / d.chunk[k];
  }
  STOKER_ASSIGN_OR_RETURN(c.count_, CheckedProduct(c.grid_, 1, UINT64_MAX, what));
  STOKER_ASSIGN_OR_RETURN(const uint64_t volume_bytes,
                          CheckedProduct(d.dims, c.elem_, UINT64_MAX, what));
  if (c.chunk_bytes_ > std::max(volume_bytes, kMostChunkBytes))
    return absl::DataLossError(absl::StrCat(what, ": chunks of ", c.chunk_bytes_,
                                            " bytes for a volume of ", volume_bytes));
  STOKER_ASSIGN_OR_RETURN(c.slots_bytes_,
                          CheckedProduct({c.count_}, c.chunk_bytes_, UINT64_MAX, what));
  // An unwritten chunk holds the fill value (0 unless the file sets one).
  c.fill_.assign(c.elem_, 0);
  ErrorScope errors;
  Id plist(H5Dget_create_plist(d.set->get()), H5Pclose);
  H5D_fill_value_t defined = H5D_FILL_VALUE_UNDEFINED;
  if (plist.ok() && H5Pfill_value_defined(plist.get(), &defined) >= 0 &&
      defined == H5D_FILL_VALUE_USER_DEFINED)
    H5Pget_fill_value(plist.get(), d.type->get(), c.fill_.data());
  return c;
}

std::vector<uint64_t> Chunks::Touching(const uint64_t* start, const uint64_t* count) const {
  const size_t nd = grid_.size();
  std::vector<uint64_t> lo(nd), hi(nd), pos(nd);
  for (size_t k = 0; k < nd; ++k) {
    if (count[k] == 0) return {};
    lo[k] = start[k] / chunk_[k];
    hi[k] = std::min(grid_[k] - 1, (start[k] + count[k] - 1) / chunk_[k]);
    if (lo[k] > hi[k]) return {};
  }
  std::vector<uint64_t> out;
  pos = lo;
  for (;;) {
    uint64_t c = 0;
    for (size_t k = 0; k < nd; ++k) c = c * grid_[k] + pos[k];
    out.push_back(c);
    size_t k = nd;
    for (;;) {
      if (k == 0) return out;
      --k;
      if (++pos[k] <= hi[k]) break;
      pos[k] = lo[k];
    }
  }
}

std::vector<uint64_t> Chunks::Origin(uint64_t c) const {
  std::vector<uint64_t> at(dims_.size());
  for (size_t k = dims_.size(), rest = c; k-- > 0; rest /= grid_[k]) {
    at[k] = (rest % grid_[k]) * chunk_[k];
  }
  return at;
}

absl::Status Chunks::Inflate(uint64_t c, uint8_t* slot) const {
  const std::vector<uint64_t> at = Origin(c);
  const std::vector<hsize_t> offset(at.begin(), at.end());
  auto fail = [&](const std::string& why) {
    return absl::DataLossError(
        absl::StrCat(what_, ": chunk at [", absl::StrJoin(at, ", "), "] ", why));
  };
  thread_local Inflater z;
  ErrorScope errors;
  unsigned mask = 0;
  haddr_t addr = HADDR_UNDEF;
  hsize_t stored = 0;
  if (H5Dget_chunk_info_by_coord(set_, offset.data(), &mask, &addr, &stored) < 0)
    return fail("cannot be looked up");
  if (stored == 0) {  // Never written.
    for (uint64_t i = 0; i < chunk_bytes_; i += elem_) std::memcpy(&slot[i], fill_.data(), elem_);
    return absl::OkStatus();
  }
  if (stored > MostStored(chunk_bytes_))
    return fail(absl::StrCat("claims ", stored, " stored bytes for ", chunk_bytes_));
  std::unique_ptr<uint8_t[]> bufs[3] = {Scratch(stored), nullptr, nullptr};
  uint32_t skipped = 0;
  if (H5Dread_chunk(set_, H5P_DEFAULT, offset.data(), &skipped, bufs[0].get()) < 0)
    return fail("cannot be read");
  // The filters to undo, last to first; the last undone writes the slot.
  std::vector<size_t> undo;
  for (size_t k = filters_.size(); k-- > 0;) {
    if (!(skipped & (1u << k))) undo.push_back(k);
  }
  const uint8_t* cur = bufs[0].get();
  size_t size = stored;
  for (size_t j = 0; j < undo.size(); ++j) {
    uint8_t* out = slot;
    if (j + 1 < undo.size()) {  // Into the other stage buffer.
      std::unique_ptr<uint8_t[]>& mid = bufs[1 + j % 2];
      if (mid == nullptr) mid = Scratch(chunk_bytes_);
      out = mid.get();
    }
    if (filters_[undo[j]] == H5Z_FILTER_DEFLATE) {
      size_t got = 0;
      if (libdeflate_zlib_decompress(z.d, cur, size, out, chunk_bytes_, &got) !=
              LIBDEFLATE_SUCCESS ||
          got != chunk_bytes_)
        return fail("does not inflate to its size");
    } else {  // Shuffle.
      if (size != chunk_bytes_) return fail("is not its size before unshuffling");
      Unshuffle(cur, size, elem_, out);
    }
    cur = out;
    size = chunk_bytes_;
  }
  if (size != chunk_bytes_) return fail(absl::StrCat("holds ", size, " bytes, not ", chunk_bytes_));
  if (undo.empty()) std::memcpy(slot, cur, size);  // Stored as is.
  return absl::OkStatus();
}

absl::Status Chunks::Read(uint64_t c, uint8_t* dst) const {
  std::unique_ptr<uint8_t[]> chunk = Scratch(chunk_bytes_);
  STOKER_RETURN_IF_ERROR(Inflate(c, chunk.get()));
  const size_t nd = dims_.size();
  const std::vector<uint64_t> at = Origin(c), zero(nd, 0);
  std::vector<uint64_t> keep(nd);  // Clipped at the volume's edges.
  for (size_t k = 0; k < nd; ++k) keep[k] = std::min(chunk_[k], dims_[k] - at[k]);
  CopyBox(chunk.get(), type_, chunk_.data(), zero.data(), keep.data(), nd, dst, type_,
          dims_.data(), at.data());
  return absl::OkStatus();
}

void Chunks::CopyOut(const uint8_t* slots, const uint64_t* start, const uint64_t* count,
                     ElemType to, uint8_t* dst) const {
  const size_t nd = dims_.size();
  std::vector<uint64_t> inner(nd), part(nd), place(nd);
  for (uint64_t c : Touching(start, count)) {
    const std::vector<uint64_t> at = Origin(c);
    for (size_t k = 0; k < nd; ++k) {
      const uint64_t lo = std::max(start[k], at[k]);
      const uint64_t hi = std::min(start[k] + count[k], at[k] + chunk_[k]);
      inner[k] = lo - at[k];
      part[k] = hi - lo;
      place[k] = lo - start[k];
    }
    CopyBox(slots + c * chunk_bytes_, type_, chunk_.data(), inner.data(), part.data(), nd, dst,
            to, count, place.data());
  }
}

absl::Status ReadWhole(const Set& d, const VolumeCache::Parallel& parallel, uint8_t* dst,
                       const std::string& what) {
  if (!d.inflatable || d.dims.empty()) {
    const std::vector<hsize_t> start(d.dims.size(), 0), count(d.dims.begin(), d.dims.end());
    return ReadSlab(d, start, count, d.elem, dst, what);
  }
  STOKER_ASSIGN_OR_RETURN(const Chunks chunks, Chunks::Of(d, what));
  absl::Mutex mu;
  absl::Status first;
  std::atomic<bool> failed{false};
  parallel(chunks.count(), [&](size_t c) {
    if (failed.load(std::memory_order_relaxed)) return;
    absl::Status s = chunks.Read(c, dst);
    if (s.ok()) return;
    absl::MutexLock lock(&mu);
    if (first.ok()) first = s;
    failed.store(true, std::memory_order_relaxed);
  });
  return first;
}

}  // namespace h5
}  // namespace stoker
