#include "server/array_source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "server/file_system.h"
#include "server/transform.h"
#include "util/checked_math.h"
#include "util/mapped_read.h"
#include "util/status_macros.h"

namespace stoker {
namespace {

// IEEE half to float.
float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // Subnormal: normalize.
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <typename T>
double Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return static_cast<double>(v);
}

double LoadAny(const uint8_t* p, ElemType t) {
  switch (t) {
    case ElemType::kBool: return *p != 0;
    case ElemType::kInt8: return Load<int8_t>(p);
    case ElemType::kUint8: return *p;
    case ElemType::kInt16: return Load<int16_t>(p);
    case ElemType::kUint16: return Load<uint16_t>(p);
    case ElemType::kInt32: return Load<int32_t>(p);
    case ElemType::kUint32: return Load<uint32_t>(p);
    case ElemType::kInt64: return Load<int64_t>(p);
    case ElemType::kUint64: return Load<uint64_t>(p);
    case ElemType::kFloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return HalfToFloat(h);
    }
    case ElemType::kFloat32: return Load<float>(p);
    case ElemType::kFloat64: return Load<double>(p);
  }
  return 0;
}

template <typename T>
void StoreInt(double v, uint8_t* p) {
  T out;
  if (std::isnan(v)) {
    out = 0;
  } else if (v <= static_cast<double>(std::numeric_limits<T>::min())) {
    out = std::numeric_limits<T>::min();
  } else if (v >= static_cast<double>(std::numeric_limits<T>::max())) {
    out = std::numeric_limits<T>::max();
  } else {
    out = static_cast<T>(v);
  }
  std::memcpy(p, &out, sizeof(T));
}

void StoreAny(double v, uint8_t* p, ElemType t) {
  switch (t) {
    case ElemType::kBool: *p = v != 0; break;
    case ElemType::kInt8: StoreInt<int8_t>(v, p); break;
    case ElemType::kUint8: StoreInt<uint8_t>(v, p); break;
    case ElemType::kInt16: StoreInt<int16_t>(v, p); break;
    case ElemType::kUint16: StoreInt<uint16_t>(v, p); break;
    case ElemType::kInt32: StoreInt<int32_t>(v, p); break;
    case ElemType::kUint32: StoreInt<uint32_t>(v, p); break;
    case ElemType::kInt64: StoreInt<int64_t>(v, p); break;
    case ElemType::kUint64: StoreInt<uint64_t>(v, p); break;
    case ElemType::kFloat16: {
      const uint16_t h = FloatToHalf(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case ElemType::kFloat32: {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case ElemType::kFloat64: std::memcpy(p, &v, 8); break;
  }
}

// One contiguous run of `n` elements.
void CopyRun(const uint8_t* src, ElemType from, uint64_t n, uint8_t* dst,
             ElemType to) {
  if (from == to) {
    // Plain stores: non-temporal ones measured half as fast here (the
    // slot's lines are soon written again, by the next batch).
    std::memcpy(dst, src, n * ElemBytes(from));
    return;
  }
  if (from == ElemType::kFloat64 && to == ElemType::kFloat32) {  // Common.
    for (uint64_t k = 0; k < n; ++k) {
      double d;
      std::memcpy(&d, src + k * 8, 8);
      const float f = static_cast<float>(d);
      std::memcpy(dst + k * 4, &f, 4);
    }
    return;
  }
  const int fb = ElemBytes(from), tb = ElemBytes(to);
  for (uint64_t k = 0; k < n; ++k) StoreAny(LoadAny(src + k * fb, from), dst + k * tb, to);
}

// ------------------------------------------------------------- .npy files

absl::Status Bad(const std::string& what, const std::string& why) {
  return absl::FailedPreconditionError(absl::StrCat(what, ": ", why));
}

absl::StatusOr<ElemType> NpyType(absl::string_view descr) {
  if (descr.size() < 3) return absl::InvalidArgumentError("descr too short");
  const char order = descr[0];
  const absl::string_view kind = descr.substr(1);
  static const std::pair<const char*, ElemType> kTypes[] = {
      {"b1", ElemType::kBool},    {"i1", ElemType::kInt8},
      {"u1", ElemType::kUint8},   {"i2", ElemType::kInt16},
      {"u2", ElemType::kUint16},  {"i4", ElemType::kInt32},
      {"u4", ElemType::kUint32},  {"i8", ElemType::kInt64},
      {"u8", ElemType::kUint64},  {"f2", ElemType::kFloat16},
      {"f4", ElemType::kFloat32}, {"f8", ElemType::kFloat64}};
  for (const auto& [name, type] : kTypes) {
    if (kind != name) continue;
    if (order == '>' && ElemBytes(type) > 1)
      return absl::InvalidArgumentError("big-endian data (byteswap it first)");
    if (order != '<' && order != '|' && order != '=' && order != '>')
      return absl::InvalidArgumentError("unknown byte order");
    return type;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("element type '", descr, "' is not a plain number"));
}

}  // namespace

namespace {

// RAM copies by file version, and the bytes they hold together.
struct ResidentSet {
  absl::Mutex mu;
  absl::flat_hash_map<std::string, std::weak_ptr<const Mapping>> copies;
};
ResidentSet& Residents() {
  static auto* set = new ResidentSet;  // Never destroyed: mappings may outlive main.
  return *set;
}

}  // namespace

Mapping::~Mapping() {
  if (data != nullptr && size > 0) munmap(const_cast<uint8_t*>(data), size);
  if (resident) {
    absl::MutexLock lock(&Residents().mu);
    auto it = Residents().copies.find(key);
    if (it != Residents().copies.end() && it->second.expired()) Residents().copies.erase(it);
  }
}

std::shared_ptr<const Mapping> Resident(std::shared_ptr<const Mapping> file,
                                        const ChargeRam& charge) {
  ResidentSet& set = Residents();
  absl::MutexLock lock(&set.mu);
  auto it = set.copies.find(file->key);
  if (it != set.copies.end()) {
    if (std::shared_ptr<const Mapping> copy = it->second.lock()) return copy;
  }
  if (file->size == 0 || !charge) return file;
  std::shared_ptr<void> token = charge(file->size);
  if (token == nullptr) return file;
  void* p = mmap(nullptr, file->size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return file;
  madvise(p, file->size, MADV_HUGEPAGE);
  auto fill = [&] { std::memcpy(p, file->data, file->size); };
  if (!GuardedMappedRead(file->key, fill).ok()) {  // Shrank: read it mapped (and fail).
    munmap(p, file->size);
    return file;
  }
  mprotect(p, file->size, PROT_READ);
  auto copy = std::make_shared<Mapping>();
  copy->data = static_cast<const uint8_t*>(p);
  copy->size = file->size;
  copy->key = file->key;
  copy->resident = true;
  copy->charge = std::move(token);
  set.copies[copy->key] = copy;
  return copy;
}

absl::StatusOr<std::shared_ptr<const Mapping>> MapFile(
    const std::string& path, const Beneath* beneath) {
  absl::StatusOr<int> fd = OpenConfined(path, O_RDONLY, beneath);
  if (!fd.ok()) return fd.status();
  struct stat st {};
  if (fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(*fd);
    return Bad(path, "not a regular file");
  }
  auto m = std::make_shared<Mapping>();
  m->size = static_cast<size_t>(st.st_size);
  m->key = absl::StrCat(path, "|", st.st_dev, "|", st.st_ino, "|", st.st_size, "|",
                        st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
  if (m->size > 0) {
    void* p = mmap(nullptr, m->size, PROT_READ, MAP_SHARED, *fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      close(*fd);
      return absl::InternalError(absl::StrCat("mmap ", path, ": ", strerror(err)));
    }
    m->data = static_cast<const uint8_t*>(p);
  }
  close(*fd);
  return std::shared_ptr<const Mapping>(std::move(m));
}

namespace {

struct NpyFile {
  std::string path;
  NpyHeader header;
  std::shared_ptr<const Mapping> map;
};

absl::StatusOr<NpyFile> OpenNpy(const std::string& path, const Beneath* beneath,
                                const ChargeRam& charge = nullptr) {
  absl::StatusOr<std::shared_ptr<const Mapping>> map = MapFile(path, beneath);
  if (!map.ok()) return map.status();
  *map = Resident(*std::move(map), charge);
  absl::StatusOr<NpyHeader> h = ParseNpyHeader((*map)->data, (*map)->size);
  if (!h.ok()) return Bad(path, std::string(h.status().message()));
  return NpyFile{path, *std::move(h), *std::move(map)};
}

uint64_t Elements(const std::vector<uint64_t>& shape, size_t from = 0) {
  uint64_t n = 1;
  for (size_t d = from; d < shape.size(); ++d) n *= shape[d];
  return n;
}

absl::StatusOr<std::vector<int64_t>> ReadNpyLabels(const std::string& path,
                                                   size_t n, const Beneath* beneath) {
  absl::StatusOr<NpyFile> f = OpenNpy(path, beneath);
  if (!f.ok()) return f.status();
  const NpyHeader& h = f->header;
  if (h.shape.size() != 1 || h.shape[0] != n || h.type == ElemType::kFloat16 ||
      h.type == ElemType::kFloat32 || h.type == ElemType::kFloat64) {
    return Bad(path, absl::StrCat("labels must be a 1-D integer array of ", n,
                                  " values"));
  }
  std::vector<int64_t> out(n);
  const uint64_t start = 0, count = n;
  STOKER_RETURN_IF_ERROR(MappedCopyRegion(path, f->map->data + h.data_offset, h.type,
                                          h.shape, &start, &count,
                                          reinterpret_cast<uint8_t*>(out.data()),
                                          ElemType::kInt64));
  return out;
}

// Samples are the rows of one file, or whole files of a folder.
class NpySource : public ArraySource {
 public:
  size_t size() const override { return single_ ? rows_ : files_.size(); }
  ElemType type() const override { return type_; }
  const std::vector<uint64_t>& shape(size_t i) const override {
    return single_ ? row_shape_ : files_[i].header.shape;
  }
  int64_t label(size_t i) const override { return labels_.empty() ? 0 : labels_[i]; }
  std::string Name(size_t i) const override {
    return single_ ? absl::StrCat(files_[0].path, "[", i, "]") : files_[i].path;
  }
  absl::Status Broken(size_t i) const override {
    return single_ || broken_.empty() ? absl::OkStatus() : broken_[i];
  }
  absl::Status Read(size_t i, const uint64_t* start, const uint64_t* count,
                    ElemType to, uint8_t* dst) const override {
    if (absl::Status b = Broken(i); !b.ok()) return b;
    const NpyFile& f = single_ ? files_[0] : files_[i];
    const uint8_t* base = f.map->data + f.header.data_offset;
    if (single_) base += i * Elements(row_shape_) * ElemBytes(type_);
    return MappedCopyRegion(Name(i), base, f.header.type, shape(i), start, count, dst, to);
  }

  bool single_ = false;
  std::vector<NpyFile> files_;
  std::vector<uint64_t> row_shape_;
  uint64_t rows_ = 0;
  ElemType type_ = ElemType::kUint8;
  std::vector<int64_t> labels_;
  std::vector<absl::Status> broken_;  // Folder: per file.
  std::shared_ptr<const Beneath> beneath_;
};

}  // namespace

int ElemBytes(ElemType t) {
  switch (t) {
    case ElemType::kBool: case ElemType::kInt8: case ElemType::kUint8: return 1;
    case ElemType::kInt16: case ElemType::kUint16: case ElemType::kFloat16: return 2;
    case ElemType::kInt32: case ElemType::kUint32: case ElemType::kFloat32: return 4;
    default: return 8;
  }
}

const char* ElemName(ElemType t) {
  static const char* kNames[] = {"bool", "int8", "uint8", "int16", "uint16",
                                 "int32", "uint32", "int64", "uint64",
                                 "float16", "float32", "float64"};
  return kNames[static_cast<int>(t)];
}

ElemType FromRingDType(uint32_t dtype) {
  switch (dtype) {
    case 2: return ElemType::kFloat32;
    case 3: return ElemType::kFloat16;
    case 4: return ElemType::kUint16;
    case 5: return ElemType::kInt16;
    case 6: return ElemType::kInt32;
    case 7: return ElemType::kInt64;
    default: return ElemType::kUint8;
  }
}

void CopyRegion(const uint8_t* src, ElemType from,
                const std::vector<uint64_t>& shape, const uint64_t* start,
                const uint64_t* count, uint8_t* dst, ElemType to) {
  const size_t nd = shape.size();
  const int fb = ElemBytes(from), tb = ElemBytes(to);
  if (nd == 0) {
    CopyRun(src, from, 1, dst, to);
    return;
  }
  // Fixed arrays, nothing on the heap: a mapped read may leave this frame
  // through siglongjmp (MappedCopyRegion).
  uint64_t stride[kMaxArrayDims], idx[kMaxArrayDims] = {};  // idx: dims 0..nd-2.
  stride[nd - 1] = 1;
  for (size_t d = nd - 1; d > 0; --d) stride[d - 1] = stride[d] * shape[d];
  const uint64_t run = count[nd - 1];
  uint64_t runs = 1;
  for (size_t d = 0; d + 1 < nd; ++d) runs *= count[d];
  for (uint64_t r = 0; r < runs; ++r) {
    uint64_t off = start[nd - 1];
    for (size_t d = 0; d + 1 < nd; ++d) off += (start[d] + idx[d]) * stride[d];
    CopyRun(src + off * fb, from, run, dst, to);
    dst += run * tb;
    for (size_t d = nd - 1; d-- > 0;) {  // Odometer.
      if (++idx[d] < count[d]) break;
      idx[d] = 0;
    }
  }
}

absl::Status MappedCopyRegion(const std::string& what, const uint8_t* src, ElemType from,
                              const std::vector<uint64_t>& shape, const uint64_t* start,
                              const uint64_t* count, uint8_t* dst, ElemType to) {
  auto copy = [&] { CopyRegion(src, from, shape, start, count, dst, to); };
  return GuardedMappedRead(what, copy);
}

absl::StatusOr<Dataset> ArrayDataset(std::shared_ptr<const ArraySource> source,
                                     std::string description) {
  Dataset ds;
  ds.description = std::move(description);
  int64_t max_label = -1;
  ds.samples.reserve(source->size());
  for (size_t i = 0; i < source->size(); ++i) {
    const int64_t label = source->label(i);
    if (label < 0 || label > INT32_MAX) {
      return absl::FailedPreconditionError(absl::StrCat(
          source->Name(i), ": label ", label, " is outside 0..2^31-1"));
    }
    max_label = std::max(max_label, label);
    ds.samples.push_back(Sample{source->Name(i), static_cast<int32_t>(label), {}});
  }
  ds.num_classes = static_cast<uint32_t>(max_label + 1);
  ds.arrays = std::move(source);
  return ds;
}

absl::StatusOr<NpyHeader> ParseNpyHeader(const uint8_t* data, size_t size) {
  static const uint8_t kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (size < 10 || std::memcmp(data, kMagic, 6) != 0)
    return absl::FailedPreconditionError("not a .npy file (no \\x93NUMPY magic)");
  const int major = data[6];
  uint64_t len = 0, at = 0;
  if (major == 1) {
    len = data[8] | (data[9] << 8);
    at = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return absl::FailedPreconditionError("truncated .npy header");
    len = uint64_t{data[8]} | uint64_t{data[9]} << 8 | uint64_t{data[10]} << 16 |
          uint64_t{data[11]} << 24;
    at = 12;
  } else {
    return absl::FailedPreconditionError(absl::StrCat(".npy version ", major, " is unknown"));
  }
  if (at + len > size) return absl::FailedPreconditionError("truncated .npy header");
  const std::string dict(reinterpret_cast<const char*>(data + at), len);
  auto value_of = [&](const std::string& key) -> absl::StatusOr<std::string> {
    const size_t k = dict.find("'" + key + "'");
    if (k == std::string::npos)
      return absl::FailedPreconditionError(absl::StrCat(".npy header lacks '", key, "'"));
    size_t v = dict.find(':', k);
    if (v == std::string::npos) return absl::FailedPreconditionError("bad .npy header");
    ++v;
    while (v < dict.size() && dict[v] == ' ') ++v;
    size_t e = v;
    if (v < dict.size() && dict[v] == '(') {
      e = dict.find(')', v);
      if (e == std::string::npos) return absl::FailedPreconditionError("bad .npy shape");
      return dict.substr(v + 1, e - v - 1);
    }
    while (e < dict.size() && dict[e] != ',' && dict[e] != '}') ++e;
    return std::string(absl::StripAsciiWhitespace(dict.substr(v, e - v)));
  };
  NpyHeader h;
  absl::StatusOr<std::string> descr = value_of("descr");
  absl::StatusOr<std::string> fortran = value_of("fortran_order");
  absl::StatusOr<std::string> shape = value_of("shape");
  if (!descr.ok()) return descr.status();
  if (!fortran.ok()) return fortran.status();
  if (!shape.ok()) return shape.status();
  std::string d = *descr;
  if (d.size() < 2 || (d.front() != '\'' && d.front() != '"'))
    return absl::FailedPreconditionError("structured .npy dtypes are not arrays of numbers");
  absl::StatusOr<ElemType> type = NpyType(d.substr(1, d.size() - 2));
  if (!type.ok()) return absl::FailedPreconditionError(type.status().message());
  h.type = *type;
  if (*fortran != "False")
    return absl::FailedPreconditionError("Fortran-order .npy (save it C-contiguous)");
  for (absl::string_view part : absl::StrSplit(*shape, ',', absl::SkipWhitespace())) {
    uint64_t dim = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &dim) || h.shape.size() >= kMaxArrayDims)
      return absl::FailedPreconditionError(absl::StrCat("bad .npy shape (", *shape, ")"));
    h.shape.push_back(dim);
  }
  h.data_offset = at + len;
  absl::StatusOr<uint64_t> bytes = CheckedProduct(h.shape, ElemBytes(h.type), size, ".npy");
  if (!bytes.ok()) return bytes.status();
  if (!RangeWithin(h.data_offset, *bytes, size)) {
    return absl::FailedPreconditionError(absl::StrCat(
        ".npy shape (", *shape, ") needs ", *bytes, " bytes of data, the file has ",
        size - h.data_offset));
  }
  return h;
}

std::string NpyBytes(ElemType type, const std::vector<uint64_t>& shape,
                     const void* data) {
  static const char* kDescr[] = {"|b1", "|i1", "|u1", "<i2", "<u2", "<i4",
                                 "<u4", "<i8", "<u8", "<f2", "<f4", "<f8"};
  std::string dims;
  for (uint64_t d : shape) absl::StrAppend(&dims, d, ",");
  if (shape.size() > 1) dims.pop_back();
  std::string dict = absl::StrCat("{'descr': '", kDescr[static_cast<int>(type)],
                                  "', 'fortran_order': False, 'shape': (", dims, "), }");
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  out += dict;
  out.append(static_cast<const char*>(data), Elements(shape) * ElemBytes(type));
  return out;
}

absl::Status CheckRows(uint64_t rows, const std::vector<uint64_t>& row_shape,
                       uint64_t max_samples, const std::string& path) {
  if (rows > max_samples) {
    return absl::ResourceExhaustedError(absl::StrCat(
        path, " holds ", rows, " samples, over the daemon's limit of ", max_samples,
        " (--max-dataset-files)"));
  }
  for (uint64_t d : row_shape) {
    if (d == 0) return Bad(path, "its samples have no elements (a dimension is 0)");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const ArraySource>> OpenNpySource(
    const std::string& path, const std::string& labels,
    std::shared_ptr<const Beneath> beneath, const ChargeRam& charge,
    uint64_t max_samples) {
  auto src = std::make_shared<NpySource>();
  src->beneath_ = beneath;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path, ec)) {
      if (e.path().extension() == ".npy" && e.is_regular_file(ec)) {
        names.push_back(e.path().string());
      }
    }
    if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot list ", path));
    std::sort(names.begin(), names.end());
    if (names.empty()) return Bad(path, "holds no .npy files");
    STOKER_RETURN_IF_ERROR(CheckRows(names.size(), {}, max_samples, path));
    bool typed = false;
    for (const std::string& name : names) {
      absl::StatusOr<NpyFile> f = OpenNpy(name, beneath.get(), charge);
      if (!f.ok()) {  // A broken sample, reported when it is read.
        src->files_.push_back(NpyFile{name, {}, nullptr});
        src->broken_.push_back(absl::DataLossError(f.status().message()));
        continue;
      }
      if (typed && f->header.type != src->type_) {
        return Bad(name, absl::StrCat("is ", ElemName(f->header.type),
                                      " but the folder's first file is ",
                                      ElemName(src->type_)));
      }
      typed = true;
      src->type_ = f->header.type;
      src->files_.push_back(*std::move(f));
      src->broken_.push_back(absl::OkStatus());
    }
    if (!typed) return Bad(path, "holds no readable .npy file");
  } else {
    if (!std::filesystem::exists(path, ec))
      return absl::NotFoundError(absl::StrCat("dataset ", path, " does not exist"));
    absl::StatusOr<NpyFile> f = OpenNpy(path, beneath.get(), charge);
    if (!f.ok()) return f.status();
    if (f->header.shape.empty() || f->header.shape[0] == 0)
      return Bad(path, "needs a first dimension of samples (shape (N, ...), N >= 1)");
    src->single_ = true;
    src->type_ = f->header.type;
    src->rows_ = f->header.shape[0];
    src->row_shape_.assign(f->header.shape.begin() + 1, f->header.shape.end());
    STOKER_RETURN_IF_ERROR(CheckRows(src->rows_, src->row_shape_, max_samples, path));
    src->files_.push_back(*std::move(f));
  }
  if (!labels.empty()) {
    absl::StatusOr<std::vector<int64_t>> l = ReadNpyLabels(labels, src->size(), beneath.get());
    if (!l.ok()) return l.status();
    src->labels_ = *std::move(l);
  }
  return std::shared_ptr<const ArraySource>(std::move(src));
}

}  // namespace stoker
