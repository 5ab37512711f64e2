#include "server/dataset/array_source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "server/access/file_system.h"
#include "server/imaging/elements.h"
#include "shm/ring_data.h"
#include "util/checked_math.h"
#include "util/mapped_read.h"
#include "util/status_macros.h"
#include "util/cache_key.h"

namespace stoker {
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

absl::StatusOr<std::shared_ptr<const Mapping>> MapOpened(int fd, const std::string& path,
                                                         std::shared_ptr<void> held) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return absl::FailedPreconditionError(absl::StrCat(path, ": not a regular file"));
  auto m = std::make_shared<Mapping>();
  m->held = std::move(held);
  m->size = static_cast<size_t>(st.st_size);
  const FileVersion v = VersionOf(st);
  m->key = CacheKey({path, v.device, v.inode, v.size, v.mtime_ns, v.ctime_ns});
  if (m->size > 0) {
    void* p = mmap(nullptr, m->size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
      return absl::InternalError(absl::StrCat("mmap ", path, ": ", strerror(errno)));
    m->data = static_cast<const uint8_t*>(p);
  }
  return std::shared_ptr<const Mapping>(std::move(m));
}

absl::StatusOr<std::shared_ptr<const Mapping>> MapFile(
    const std::string& path, const Beneath* beneath) {
  absl::StatusOr<std::shared_ptr<void>> held = ChargeHeld(beneath, path);
  if (!held.ok()) return held.status();
  absl::StatusOr<int> fd = OpenConfined(path, O_RDONLY, beneath);
  if (!fd.ok()) return fd.status();
  absl::StatusOr<std::shared_ptr<const Mapping>> m = MapOpened(*fd, path, *std::move(held));
  close(*fd);
  return m;
}

absl::StatusOr<SourceKey> ArraySource::Identify(const std::string& path) const {
  return Read(path, nullptr, nullptr);
}

absl::Status ArraySource::Read(const std::string& path, std::string*, FileVersion*) const {
  return absl::FailedPreconditionError(absl::StrCat(path, " is an array, not a file"));
}

namespace {

// Adds n elements of type T at `data` to `b` (floats: != 0, NaN included).
template <typename T>
void AddTyped(const uint8_t* data, uint64_t n, Foreground::Builder& b) {
  b.Add(n, [data](uint64_t k) {
    T v;
    std::memcpy(&v, data + k * sizeof(T), sizeof(T));
    return v != 0;
  });
}

void AddElements(const uint8_t* data, ElemType t, uint64_t n, Foreground::Builder& b) {
  switch (t) {
    case ElemType::kBool: case ElemType::kInt8: case ElemType::kUint8:
      return AddTyped<uint8_t>(data, n, b);
    case ElemType::kFloat16: case ElemType::kBfloat16:  // Any bit but the sign's.
      return b.Add(n, [data](uint64_t k) {
        uint16_t h;
        std::memcpy(&h, data + 2 * k, 2);
        return (h & 0x7fff) != 0;
      });
    case ElemType::kInt16: case ElemType::kUint16: return AddTyped<uint16_t>(data, n, b);
    case ElemType::kInt32: case ElemType::kUint32: return AddTyped<uint32_t>(data, n, b);
    case ElemType::kInt64: case ElemType::kUint64: return AddTyped<uint64_t>(data, n, b);
    case ElemType::kFloat32: return AddTyped<float>(data, n, b);
    case ElemType::kFloat64: return AddTyped<double>(data, n, b);
  }
}

}  // namespace

Foreground ScanForeground(const uint8_t* data, ElemType t, uint64_t elements) {
  Foreground::Builder b(elements);
  AddElements(data, t, elements, b);
  return b.Finish();
}

absl::StatusOr<Foreground> ArraySource::ForegroundOf(size_t i, uint32_t file) const {
  const std::vector<uint64_t>& shape = this->shape(i);
  uint64_t elements = 1, row = 1;  // row: elements of one index of dimension 0.
  for (size_t k = 0; k < shape.size(); ++k) {
    elements *= shape[k];
    if (k > 0) row *= shape[k];
  }
  Foreground::Builder b(elements);
  // By value as float64: exact for every element type's zero and non-zero
  // (type() is sample 0's; a paired array may be of another type).
  const ElemType t = ElemType::kFloat64;
  if (shape.empty()) {
    uint8_t one[8];
    STOKER_RETURN_IF_ERROR(ReadArray(i, file, nullptr, nullptr, t, one));
    AddElements(one, t, 1, b);
    return b.Finish();
  }
  // Slabs of whole rows of dimension 0, about 4 MiB each.
  const uint64_t rows = std::max<uint64_t>(1, (uint64_t{4} << 20) / (row * ElemBytes(t) + 1));
  std::vector<uint8_t> slab;
  std::vector<uint64_t> start(shape.size(), 0), count = shape;
  for (uint64_t r = 0; r < shape[0]; r += rows) {
    start[0] = r;
    count[0] = std::min(rows, shape[0] - r);
    slab.resize(count[0] * row * ElemBytes(t));
    STOKER_RETURN_IF_ERROR(ReadArray(i, file, start.data(), count.data(), t, slab.data()));
    AddElements(slab.data(), t, count[0] * row, b);
  }
  return b.Finish();
}


void CopyRegion(const uint8_t* src, ElemType from,
                const std::vector<uint64_t>& shape, const uint64_t* start,
                const uint64_t* count, uint8_t* dst, ElemType to) {
  const uint64_t zero[kMaxArrayDims] = {};
  CopyBox(src, from, shape.data(), start, count, shape.size(), dst, to, count, zero);
}

void CopyBox(const uint8_t* src, ElemType from, const uint64_t* src_shape,
             const uint64_t* src_start, const uint64_t* count, size_t nd, uint8_t* dst,
             ElemType to, const uint64_t* dst_shape, const uint64_t* dst_start) {
  const int fb = ElemBytes(from), tb = ElemBytes(to);
  if (nd == 0) {
    ConvertRun(src, from, 1, dst, to);
    return;
  }
  // Fixed arrays, nothing on the heap: a mapped read may leave this frame
  // through siglongjmp (MappedCopyRegion).
  uint64_t from_stride[kMaxArrayDims], to_stride[kMaxArrayDims];
  uint64_t idx[kMaxArrayDims] = {};  // Dims 0..nd-2.
  from_stride[nd - 1] = to_stride[nd - 1] = 1;
  for (size_t d = nd - 1; d > 0; --d) {
    from_stride[d - 1] = from_stride[d] * src_shape[d];
    to_stride[d - 1] = to_stride[d] * dst_shape[d];
  }
  const uint64_t run = count[nd - 1];
  uint64_t runs = 1;
  for (size_t d = 0; d + 1 < nd; ++d) runs *= count[d];
  for (uint64_t r = 0; r < runs; ++r) {
    uint64_t in = src_start[nd - 1], out = dst_start[nd - 1];
    for (size_t d = 0; d + 1 < nd; ++d) {
      in += (src_start[d] + idx[d]) * from_stride[d];
      out += (dst_start[d] + idx[d]) * to_stride[d];
    }
    ConvertRun(src + in * fb, from, run, dst + out * tb, to);
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

namespace {

class ConcatSource : public ArraySource {
 public:
  explicit ConcatSource(std::vector<std::shared_ptr<const ArraySource>> parts)
      : parts_(std::move(parts)) {
    starts_.push_back(0);
    for (const auto& p : parts_) starts_.push_back(starts_.back() + p->size());
  }
  size_t size() const override { return starts_.back(); }
  ElemType type() const override { return parts_[0]->type(); }
  const std::vector<uint64_t>& shape(size_t i) const override {
    const auto [k, j] = Locate(i);
    return parts_[k]->shape(j);
  }
  int64_t label(size_t i) const override {
    const auto [k, j] = Locate(i);
    return parts_[k]->label(j);
  }
  std::string Name(size_t i) const override {
    const auto [k, j] = Locate(i);
    return parts_[k]->Name(j);
  }
  absl::Status Broken(size_t i) const override {
    const auto [k, j] = Locate(i);
    return parts_[k]->Broken(j);
  }
  uint32_t files() const override { return parts_[0]->files(); }
  absl::Status ReadArray(size_t i, uint32_t file, const uint64_t* start, const uint64_t* count,
                         ElemType to, uint8_t* dst) const override {
    const auto [k, j] = Locate(i);
    return parts_[k]->ReadArray(j, file, start, count, to, dst);
  }
  absl::StatusOr<Foreground> ForegroundOf(size_t i, uint32_t file) const override {
    const auto [k, j] = Locate(i);
    return parts_[k]->ForegroundOf(j, file);
  }
  std::string FileName(size_t i, uint32_t file) const override {
    const auto [k, j] = Locate(i);
    return parts_[k]->FileName(j, file);
  }
  std::vector<double> Affine(size_t i, uint32_t file) const override {
    const auto [k, j] = Locate(i);
    return parts_[k]->Affine(j, file);
  }
  std::vector<RowSpan> RowSpans(uint32_t file) const override {
    std::vector<RowSpan> spans;
    for (size_t k = 0; k < parts_.size(); ++k) {
      for (RowSpan s : parts_[k]->RowSpans(file)) {
        s.first += starts_[k];
        spans.push_back(s);
      }
    }
    return spans;
  }

 private:
  // The part holding sample i, and the sample's index in it.
  std::pair<size_t, size_t> Locate(size_t i) const {
    const size_t k = std::upper_bound(starts_.begin(), starts_.end(), i) - starts_.begin() - 1;
    return {k, i - starts_[k]};
  }
  const std::vector<std::shared_ptr<const ArraySource>> parts_;
  std::vector<size_t> starts_;  // starts_[k]: part k's first sample; back(): all.
};

class RepeatSource : public ArraySource {
 public:
  RepeatSource(std::shared_ptr<const ArraySource> base, uint32_t n)
      : base_(std::move(base)), n_(n) {}
  size_t size() const override { return base_->size() * n_; }
  ElemType type() const override { return base_->type(); }
  const std::vector<uint64_t>& shape(size_t i) const override { return base_->shape(i / n_); }
  int64_t label(size_t i) const override { return base_->label(i / n_); }
  std::string Name(size_t i) const override { return base_->Name(i / n_); }
  absl::Status Broken(size_t i) const override { return base_->Broken(i / n_); }
  uint32_t files() const override { return base_->files(); }
  absl::Status ReadArray(size_t i, uint32_t file, const uint64_t* start, const uint64_t* count,
                         ElemType to, uint8_t* dst) const override {
    return base_->ReadArray(i / n_, file, start, count, to, dst);
  }
  absl::StatusOr<Foreground> ForegroundOf(size_t i, uint32_t file) const override {
    return base_->ForegroundOf(i / n_, file);
  }
  std::string FileName(size_t i, uint32_t file) const override {
    return base_->FileName(i / n_, file);
  }
  std::vector<double> Affine(size_t i, uint32_t file) const override {
    return base_->Affine(i / n_, file);
  }

 private:
  const std::shared_ptr<const ArraySource> base_;
  const uint32_t n_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<const ArraySource>> RepeatArrays(
    std::shared_ptr<const ArraySource> source, uint32_t n, uint64_t max_samples,
    const std::string& path) {
  if (n <= 1) return source;
  if (source->size() > max_samples / n) {
    return absl::ResourceExhaustedError(absl::StrCat(
        path, " holds ", source->size(), " volumes x ", n, " samples per volume, over the "
        "daemon's limit of ", max_samples, " samples (--max-dataset-files)"));
  }
  return std::shared_ptr<const ArraySource>(std::make_shared<RepeatSource>(std::move(source), n));
}

absl::StatusOr<std::shared_ptr<const ArraySource>> ConcatArrays(
    std::vector<std::shared_ptr<const ArraySource>> parts, const std::vector<std::string>& names,
    uint64_t max_samples, const std::string& path) {
  if (parts.empty()) return absl::FailedPreconditionError(absl::StrCat(path, ": no files"));
  uint64_t rows = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    if (parts[k]->type() != parts[0]->type()) {
      return absl::FailedPreconditionError(
          absl::StrCat(names[k], ": is ", ElemName(parts[k]->type()), " but the folder's first file is ",
                       ElemName(parts[0]->type())));
    }
    rows += parts[k]->size();
  }
  STOKER_RETURN_IF_ERROR(CheckRows(rows, {}, max_samples, path));
  return std::shared_ptr<const ArraySource>(std::make_shared<ConcatSource>(std::move(parts)));
}

absl::StatusOr<Dataset> ArrayDataset(std::shared_ptr<const ArraySource> source,
                                     std::string description, const ScanLimits& limits) {
  Dataset ds;
  ListCharge charge(limits);
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
    Sample sample{source->Name(i), static_cast<int32_t>(label), {}};
    STOKER_RETURN_IF_ERROR(charge.Add(sample));
    ds.samples.push_back(std::move(sample));
  }
  STOKER_RETURN_IF_ERROR(charge.Finish(&ds));
  ds.num_classes = static_cast<uint32_t>(max_label + 1);
  ds.files_per_sample = source->files();
  ds.source = std::move(source);
  return ds;
}

absl::Status CheckRows(uint64_t rows, const std::vector<uint64_t>& row_shape,
                       uint64_t max_samples, const std::string& path) {
  if (rows > max_samples) {
    return absl::ResourceExhaustedError(absl::StrCat(
        path, " holds ", rows, " samples, over the daemon's limit of ", max_samples,
        " (--max-dataset-files)"));
  }
  for (uint64_t d : row_shape) {
    if (d == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": its samples have no elements (a dimension is 0)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace stoker
