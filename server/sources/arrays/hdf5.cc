// The hdf5 source kind (sources/hdf5.h): HDF5 datasets as an ArraySource,
// through the confined file access of hdf5_file.h. A contiguous, unfiltered
// little-endian dataset is read straight from a read-only mapping of its
// file at the offset HDF5 reports (as an .npy). A chunked or compressed
// dataset of rows is read whole into RAM when the caller's budget allows;
// a chunked or compressed volume of a folder is decoded whole into the
// daemon's volume cache on its first read (chunks inflated in parallel
// outside the library's lock) and patches are copied from there; past
// either budget, by hyperslab through the library.
#include "server/sources/arrays/hdf5.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "util/buffer.h"
#include "server/sources/source.h"
#include "util/file_kinds.h"
#include "util/status_macros.h"
#include "server/access/file_system.h"
#include "util/checked_math.h"
#include "util/log.h"
#include "server/sources/arrays/hdf5_file.h"
#include "util/cache_key.h"

namespace stoker {
namespace {

class Hdf5Source : public ArraySource, public std::enable_shared_from_this<Hdf5Source> {
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
  absl::Status ReadArray(size_t i, uint32_t, const uint64_t* start, const uint64_t* count,
                         ElemType to, uint8_t* dst) const override {
    if (absl::Status b = Broken(i); !b.ok()) return b;
    const std::vector<uint64_t>& sh = shape(i);
    const uint64_t row = RowBytes();
    if (memory_ != nullptr) {  // Whole dataset in RAM.
      CopyRegion(reinterpret_cast<const uint8_t*>(memory_->data()) + i * row,
                 elem_, sh, start, count, dst, to);
      return absl::OkStatus();
    }
    const Open& o = folder_ ? open_[i] : open_[0];
    if (folder_ && volumes_ != nullptr && o.map == nullptr) {
      absl::StatusOr<Buffer> whole = Decoded(i, o, start, count);
      if (!whole.ok()) return whole.status();
      if (*whole != nullptr) {  // The decoded volume: a strided copy.
        const uint8_t* bytes = reinterpret_cast<const uint8_t*>((*whole)->data());
        if (o.chunks != nullptr) {
          o.chunks->CopyOut(bytes, start, count, to, dst);
        } else {
          CopyRegion(bytes, elem_, sh, start, count, dst, to);
        }
        return absl::OkStatus();
      }
    }
    if (o.map != nullptr) {  // Contiguous: straight from the mapping.
      return MappedCopyRegion(Name(i), o.map->data + o.set.offset + (folder_ ? 0 : i * row),
                              elem_, sh, start, count, dst, to);
    }
    std::vector<uint64_t> s, c;
    if (folder_) {
      s.assign(start, start + sh.size());
      c.assign(count, count + sh.size());
      return h5::ReadSlab(o.set, s, c, to, dst, files_[i]);
    }
    s.push_back(i);
    c.push_back(1);
    s.insert(s.end(), start, start + sh.size());
    c.insert(c.end(), count, count + sh.size());
    return h5::ReadSlab(o.set, s, c, to, dst, Name(i));
  }

  std::vector<RowSpan> RowSpans(uint32_t) const override {
    if (folder_) return {};
    const uint64_t row = RowBytes();
    if (memory_ != nullptr) {
      return {RowSpan{0, rows_, reinterpret_cast<const uint8_t*>(memory_->data()), row, elem_,
                      &row_shape_, false}};
    }
    const Open& o = open_[0];
    if (o.map == nullptr) return {};
    return {RowSpan{0, rows_, o.map->data + o.set.offset, row, elem_, &row_shape_,
                    !o.map->resident}};
  }

  // Bytes of one row of a single file's dataset, as stored.
  uint64_t RowBytes() const {
    uint64_t row = ElemBytes(elem_);
    for (uint64_t d : row_shape_) row *= d;
    return row;
  }

  // One file kept open for reads: its dataset, and a mapping when the
  // dataset is contiguous, or its chunks when a volume is kept by them.
  struct Open {
    std::string version;         // The file's (h5::File::version).
    std::shared_ptr<void> held;  // Its token (ChargeHeld).
    h5::Set set;
    std::shared_ptr<const Mapping> map;
    std::shared_ptr<const h5::Chunks> chunks;
  };
  // Volume i through the volume cache, with at least the region
  // [start, start + count) decoded: chunk by chunk (the chunks the region
  // touches, kept in chunk order: h5::Chunks) when the volume's chunks can
  // be, else whole (in row-major order). Null (after one warning per file)
  // when it could never fit the cache.
  absl::StatusOr<Buffer> Decoded(size_t i, const Open& o, const uint64_t* start,
                                const uint64_t* count) const {
    absl::StatusOr<uint64_t> bytes = CheckedProduct(o.set.dims, ElemBytes(elem_), UINT64_MAX,
                                                    files_[i]);
    if (!bytes.ok()) return absl::DataLossError(bytes.status().message());
    absl::StatusOr<Buffer> whole =
        o.chunks != nullptr
            ? volumes_->GetPieces(CacheKey({"hdf5-chunks", o.version, dataset_, o.set.described}), o.chunks->slots_bytes(), o.chunks->count(),
                                  o.chunks->Touching(start, count), FillChunk(i))
            : volumes_->Get(CacheKey({"hdf5", o.version, dataset_, o.set.described}), *bytes, [&](const VolumeCache::Parallel& parallel, uint8_t* out) {
                return h5::ReadWhole(o.set, parallel, out);
              }, owner_);
    if (whole.ok() && *whole == nullptr && !warned_[i].exchange(true)) {
      LogWarning(absl::StrCat(files_[i], ": its volume (",
                              o.chunks != nullptr ? o.chunks->slots_bytes() : *bytes,
                              " bytes) is larger than the volume cache (",
                              volumes_->capacity_bytes(),
                              " bytes, --volume-cache-bytes): read by region from the file, "
                              "one library call per patch"));
    }
    return whole;
  }
  // Fills chunk c of file i's volume into its slot; kept by the volume
  // cache to fill the rest while the daemon is idle, so it holds this
  // source weakly (CANCELLED once the source is gone).
  VolumeCache::FillPiece FillChunk(size_t i) const {
    return [weak = weak_from_this(), i](uint64_t c, uint8_t* slots) -> absl::Status {
      std::shared_ptr<const Hdf5Source> self = weak.lock();
      if (self == nullptr) return absl::CancelledError("the volume's source was closed");
      const h5::Chunks& chunks = *self->open_[i].chunks;
      return chunks.Inflate(c, slots + c * chunks.chunk_bytes());
    };
  }
  // Keeps dataset `d` of `f` open, mapping the file when `d` is raw, and
  // keeping a folder's volume by its chunks when it has them. Its chunk
  // index and compact bytes are charged to the user's list memory:
  // RESOURCE_EXHAUSTED past it.
  absl::Status Keep(const h5::File& f, h5::Set d) {
    const uint64_t index =
        d.compact.size() + (d.chunks != nullptr ? d.chunks->index_bytes() : 0);
    if (index > 0 && list_charge_) {
      std::shared_ptr<void> token = list_charge_(index);
      if (token == nullptr) {
        return absl::ResourceExhaustedError(absl::StrCat(
            f.path, ": its chunk index (", index,
            " bytes) passed this user's memory for sample lists (--max-list-bytes-per-user)"));
      }
      index_charge_.push_back(std::move(token));
    }
    Open o{f.version, f.held, std::move(d), nullptr, nullptr};
    absl::StatusOr<uint64_t> bytes =
        CheckedProduct(o.set.dims, ElemBytes(o.set.elem), UINT64_MAX, f.path);
    // Kept in chunk order unless chunks far past the edges would more than
    // double it; then decoded whole.
    if (folder_ && volumes_ != nullptr && o.set.chunked && bytes.ok() &&
        o.set.chunks->slots_bytes() / 2 <= *bytes)
      o.chunks = o.set.chunks;
    if (o.set.raw && bytes.ok()) {
      absl::StatusOr<std::shared_ptr<const Mapping>> m = MapOpened(o.set.fd->get(), f.path, f.held);
      if (m.ok() && RangeWithin(o.set.offset, *bytes, (*m)->size)) {
        o.map = Resident(*std::move(m), charge_);
      }
    }
    open_.push_back(std::move(o));
    return absl::OkStatus();
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
  ChargeRam list_charge_;                           // Chunk indexes' memory.
  std::vector<std::shared_ptr<void>> index_charge_;  // What they hold.
  std::shared_ptr<void> memory_charge_;  // Holds memory_'s bytes.
  Buffer memory_;
  std::shared_ptr<const Beneath> beneath_;
  // Spreads a whole read's chunks over the decode pool (serial without a
  // volume cache).
  VolumeCache::Parallel parallel() const {
    return volumes_ != nullptr ? volumes_->parallel() : VolumeCache::Parallel(&VolumeCache::Serial);
  }
  VolumeCache* volumes_ = nullptr;  // Folder volumes decoded here; may be null.
  int64_t owner_ = -1;  // Whose decodes they are (VolumeCache::Get).
  std::unique_ptr<std::atomic<bool>[]> warned_;  // Per file: oversized, said.
};

absl::StatusOr<std::vector<int64_t>> ReadLabels(const absl::StatusOr<h5::Set>& d,
                                                const std::string& path, const std::string& name,
                                                size_t n) {
  if (!d.ok()) return d.status();
  if (d->dims.size() != 1 || d->dims[0] != n || shm::Elem(d->elem).is_float()) {
    return h5::Failed(path, absl::StrCat("labels '", name, "' must be 1-D integers, ",
                                       n, " of them"));
  }
  std::vector<int64_t> out(n);
  absl::Status s = h5::ReadSlab(*d, {0}, {n}, ElemType::kInt64,
                                reinterpret_cast<uint8_t*>(out.data()), path);
  if (!s.ok()) return s;
  return out;
}

// An empty source of `dataset` in `path` (a file or a folder).
std::shared_ptr<Hdf5Source> NewSource(const std::string& path, const std::string& dataset,
                                      const ChargeRam& charge,
                                      std::shared_ptr<const Beneath> beneath,
                                      VolumeCache* volumes, const ChargeRam& list_charge) {
  auto src = std::make_shared<Hdf5Source>();
  src->list_charge_ = list_charge;
  src->path_ = path;
  src->dataset_ = dataset;
  src->charge_ = charge;
  src->beneath_ = std::move(beneath);
  src->volumes_ = volumes;
  return src;
}

// One file whose dataset holds rows [N, ...] (src's path_ and dataset_
// set): its rows, labels, and in RAM when `charge` allows a chunked or
// compressed dataset.
absl::StatusOr<std::shared_ptr<const ArraySource>> OpenRows(std::shared_ptr<Hdf5Source> src,
                                                            const std::string& labels,
                                                            uint64_t max_samples,
                                                            h5::Prober& prober) {
  const std::string& path = src->path_;
  const std::string& dataset = src->dataset_;
  const ChargeRam& charge = src->charge_;
  std::vector<std::string> names{dataset};
  if (!labels.empty()) names.push_back(labels);
  absl::StatusOr<h5::File> f = h5::OpenFile(path, src->beneath_.get(), prober, names);
  if (!f.ok()) return f.status();
  absl::StatusOr<h5::Set>& d = f->sets[0];
  if (!d.ok()) return d.status();
  if (d->dims.empty() || d->dims[0] == 0)
    return h5::Failed(path, absl::StrCat("dataset '", dataset,
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
    absl::StatusOr<std::vector<int64_t>> l = ReadLabels(f->sets[1], path, labels, src->rows_);
    if (!l.ok()) return l.status();
    src->labels_ = *std::move(l);
  }
  const uint64_t bytes = *all_bytes;
  STOKER_RETURN_IF_ERROR(src->Keep(*f, *std::move(d)));
  const h5::Set& set = src->open_[0].set;
  std::shared_ptr<void> token = src->open_[0].map == nullptr && charge
                                    ? charge(bytes)
                                    : nullptr;
  if (token != nullptr) {
    // Chunked or compressed: one read of everything, not a library call
    // (and its lock) per sample.
    src->memory_charge_ = std::move(token);
    STOKER_ASSIGN_OR_RETURN(WritablePages all, Pages(bytes, /*huge=*/true));
    STOKER_RETURN_IF_ERROR(h5::ReadWhole(set, src->parallel(), all.data));
    src->memory_ = std::move(all.buffer);
  }
  return std::shared_ptr<const ArraySource>(std::move(src));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const ArraySource>> OpenHdf5Source(
    const std::string& path, const std::string& dataset,
    const std::string& labels, const ChargeRam& charge,
    std::shared_ptr<const Beneath> beneath, uint64_t max_samples, bool rows,
    VolumeCache* volumes, int64_t owner, const ChargeRam& list_charge) {
  if (dataset.empty())
    return absl::InvalidArgumentError("dataset.hdf5.dataset: name the HDF5 dataset");
  auto src = NewSource(path, dataset, charge, beneath, volumes, list_charge);
  src->owner_ = owner;
  // One reader for this source's files: it only ever sees this caller's.
  h5::Prober prober;
  absl::StatusOr<std::vector<std::string>> entries =
      ListFolder(path, beneath.get(), max_samples);
  if (!entries.ok() && entries.status().code() != absl::StatusCode::kFailedPrecondition)
    return entries.status();  // Not found, outside the confinement.
  if (entries.ok()) {
    src->folder_ = true;
    for (const std::string& name : *entries) {
      const std::string file = InFolder(path, name);
      if (Hdf5Name(name) || Hdf5Head(ReadHead(file, beneath.get(), kKindHeadBytes).value_or("")))
        src->files_.push_back(file);
    }
    if (src->files_.empty())
      return h5::Failed(path, "holds no HDF5 files (.h5/.hdf5 in any case, or by content)");
    if (rows || !labels.empty()) {  // Feature files: rows across files.
      std::vector<std::shared_ptr<const ArraySource>> parts;
      for (const std::string& name : src->files_) {
        absl::StatusOr<std::shared_ptr<const ArraySource>> rows_of =
            OpenRows(NewSource(name, dataset, charge, beneath, volumes, list_charge), labels,
                     max_samples,
                     prober);
        if (!rows_of.ok()) return rows_of.status();
        parts.push_back(*std::move(rows_of));
      }
      return ConcatArrays(std::move(parts), src->files_, max_samples, path);
    }
    if (absl::Status n = CheckRows(src->files_.size(), {}, max_samples, path); !n.ok())
      return n;
    bool typed = false;
    for (const std::string& name : src->files_) {
      absl::StatusOr<h5::File> f = h5::OpenFile(name, beneath.get(), prober, {dataset});
      absl::StatusOr<h5::Set> d = f.ok() ? f->sets[0] : absl::StatusOr<h5::Set>(f.status());
      if (!d.ok()) {  // A broken sample, reported when it is read.
        src->broken_.push_back(absl::DataLossError(d.status().message()));
        src->shapes_.emplace_back();
        src->open_.emplace_back();
        continue;
      }
      if (typed && d->elem != src->elem_)
        return h5::Failed(name, "its element type differs from the folder's first file's");
      typed = true;
      src->elem_ = d->elem;
      src->shapes_.push_back(d->dims);
      src->broken_.push_back(absl::OkStatus());
      STOKER_RETURN_IF_ERROR(src->Keep(*f, *std::move(d)));
    }
    if (!typed) return h5::Failed(path, "holds no readable HDF5 file");
    src->warned_ = std::make_unique<std::atomic<bool>[]>(src->files_.size());
    return std::shared_ptr<const ArraySource>(std::move(src));
  }
  return OpenRows(std::move(src), labels, max_samples, prober);
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
                                           ctx.beneath, ctx.limits.max_files, h.rows(),
                                           ctx.volumes, ctx.uid, ctx.limits.charge_list));
    return ArrayDataset(std::move(arrays), absl::StrCat("hdf5:", h.path(), ":", h.dataset()),
                        ctx.limits);
  }
};

}  // namespace

STOKER_DEFINE_SOURCE(Hdf5SourceKind, Hdf5Kind)

}  // namespace stoker
