// Typed-array sample sources (the npy and hdf5 kinds, server/sources): a
// sample is an N-D array (a feature vector, a volume); reads are regions of
// it, converted to the field's element type on the way into the ring slot.
// What they share lives here: element types, region copies, file mappings
// and RAM copies charged to their caller, and the Dataset over them.
//
// NumPy files are mapped read-only: the page cache is their cache, shared
// by every session and process. An HDF5 dataset no larger than the
// in-memory budget is read once, whole, into RAM (one large read instead of
// one library call per sample); a larger one is read by hyperslab per
// region. Both are shared by all sessions of the daemon while any uses
// them (a registry keyed by path, size and mtime).
//
// Labels: a .npy of N integers (`labels`) or an HDF5 dataset of N integers
// in the same file; without, every label is 0.
//
// Headers are validated when the source opens (magic, version, dtype,
// C order, shape against the file size): a bad single file is
// FAILED_PRECONDITION naming it; a bad file in a folder is a broken sample
// whose reads fail (per-sample errors), never a crash on a later read.
// Thread-safe after Open.
#ifndef STOKER_SERVER_DATASET_ARRAY_SOURCE_H_
#define STOKER_SERVER_DATASET_ARRAY_SOURCE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/dataset/dataset.h"
#include "server/imaging/foreground.h"
#include "server/dataset/sample_source.h"
#include "shm/dtypes.h"

namespace stoker {

// Samples an array dataset may hold by default (the daemon's
// --max-dataset-files): a plan entry and a name are kept per sample.
inline constexpr uint64_t kDefaultMaxArraySamples = 20'000'000;
// Most dimensions of an array (an .npy or HDF5 dataset).
inline constexpr size_t kMaxArrayDims = 32;

// Element types of arrays in files: the table in shm/dtypes.h (a superset
// of the ring's field dtypes).
using shm::ElemBytes;
using shm::ElemName;
using shm::ElemType;
using shm::FromRingDType;

// CopyRegion from a file mapping whose file its owner may truncate: a read
// past the new end is DATA_LOSS naming `what` (util/mapped_read.h), never
// SIGBUS. At most kMaxArrayDims dimensions.
absl::Status MappedCopyRegion(const std::string& what, const uint8_t* src, ElemType from,
                              const std::vector<uint64_t>& shape, const uint64_t* start,
                              const uint64_t* count, uint8_t* dst, ElemType to);

// Copies the row-major region [start, start + count) of an array of `shape`
// and type `from` at `src` into `dst` (contiguous, type `to`), converting
// by value (float to integer truncates toward zero, saturating; NaN is 0).
// At most kMaxArrayDims dimensions.
void CopyRegion(const uint8_t* src, ElemType from,
                const std::vector<uint64_t>& shape, const uint64_t* start,
                const uint64_t* count, uint8_t* dst, ElemType to);

// The general form: the box [src_start, src_start + count) of a row-major
// array of `src_shape` and type `from` into the box at `dst_start` of a
// row-major array of `dst_shape` and type `to`, both of rank nd (at most
// kMaxArrayDims), each box inside its array. CopyRegion is the box at 0 of
// an array of shape `count`; a chunk of a volume is the box of the whole
// chunk copied to its place, or a part of it to a patch.
void CopyBox(const uint8_t* src, ElemType from, const uint64_t* src_shape,
             const uint64_t* src_start, const uint64_t* count, size_t nd, uint8_t* dst,
             ElemType to, const uint64_t* dst_shape, const uint64_t* dst_start);

// A read-only mapping of a whole file (unmapped when the last owner goes),
// or a RAM copy of one (see Resident).
struct Mapping {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::string key;        // path, device, inode, size, mtime.
  bool resident = false;  // A RAM copy, its bytes charged by `charge`.
  std::shared_ptr<void> charge;
  std::shared_ptr<void> held;  // The mapping's token (ChargeHeld).
  ~Mapping();
};

// ChargeRam (server/dataset/dataset.h) for an array source: the RAM it wants to
// hold (a RAM copy of a file, a dataset read whole); null when there is no
// room: the source then reads from its mapping, or per sample. A null
// function: no RAM copies at all.

// A RAM copy of `file` (anonymous memory, on huge pages where the kernel
// allows: random regions of a volume copy twice as fast as from the page
// cache's 4 KiB pages), shared by every source that asks for the same file
// version while any holds it; `file` itself when `charge` has no room.
std::shared_ptr<const Mapping> Resident(std::shared_ptr<const Mapping> file,
                                        const ChargeRam& charge);
// Maps `path` (opened beneath `beneath` when set). FAILED_PRECONDITION for
// something that is not a regular file.
absl::StatusOr<std::shared_ptr<const Mapping>> MapFile(const std::string& path,
                                                       const Beneath* beneath);
// Maps the file open at `fd` (its descriptor stays the caller's), holding
// `held` (its ChargeHeld token) while mapped. FAILED_PRECONDITION for
// something that is not a regular file.
absl::StatusOr<std::shared_ptr<const Mapping>> MapOpened(int fd, const std::string& path,
                                                         std::shared_ptr<void> held);

// Samples [first, first + rows) of an array source lying in memory as the
// rows of one array (a single .npy file or HDF5 dataset, mapped or in RAM):
// sample first + r is the array of `*shape` and `type` at
// data + r * row_bytes. Valid while the source lives.
struct RowSpan {
  uint64_t first = 0, rows = 0;
  const uint8_t* data = nullptr;
  uint64_t row_bytes = 0;
  ElemType type = ElemType::kUint8;
  const std::vector<uint64_t>* shape = nullptr;
  // A file mapping its owner may truncate: read only under
  // GuardedMappedRead (util/mapped_read.h).
  bool mapped = false;
};

// A SampleSource whose samples are arrays read by region (arrays() is
// itself); its whole-file Identify and Read are FAILED_PRECONDITION.
class ArraySource : public SampleSource {
 public:
  absl::StatusOr<SourceKey> Identify(const std::string& path) const final;
  bool Versioned() const final { return false; }
  absl::Status Read(const std::string& path, std::string* out,
                    FileVersion* version) const final;
  const ArraySource* arrays() const final { return this; }

  virtual size_t size() const = 0;
  virtual ElemType type() const = 0;
  // Shape of sample i (without the sample dimension).
  virtual const std::vector<uint64_t>& shape(size_t i) const = 0;
  virtual int64_t label(size_t i) const = 0;
  // What to call sample i in errors and DescribeSamples: "file.npy[7]".
  virtual std::string Name(size_t i) const = 0;
  // A file of a folder source that could not be opened (a bad header, not
  // an HDF5 file): the error its reads return (a per-sample error, as for
  // a corrupt image); OK otherwise.
  virtual absl::Status Broken(size_t i) const { return absl::OkStatus(); }
  // Arrays per sample, all of sample i's shape (a volume and its label
  // volume): array fields read the one their FieldSpec.file names. 1
  // unless a kind pairs them.
  virtual uint32_t files() const { return 1; }
  // Region of array `file` (< files()) of sample i into dst as `to` (see
  // CopyRegion). DATA_LOSS when the file changed or cannot be read any more,
  // or (a paired array) its shape is not shape(i).
  virtual absl::Status ReadArray(size_t i, uint32_t file, const uint64_t* start,
                                 const uint64_t* count, ElemType to, uint8_t* dst) const = 0;
  // The foreground (elements != 0) of array `file` of sample i, for
  // label-biased patches (server/imaging/foreground.h); ReadArray's errors. This
  // one reads the array slab by slab and keeps nothing; a kind that keeps
  // decoded volumes builds it from the kept volume and keeps it there.
  virtual absl::StatusOr<Foreground> ForegroundOf(size_t i, uint32_t file) const;
  // What to call array `file` of sample i (its file); Name(i) by default.
  virtual std::string FileName(size_t i, uint32_t file) const { return Name(i); }
  // Where array `file` of sample i lies in the world, for kinds whose
  // files say (NIfTI): voxel index (the array's own axes) to world
  // millimetres, row-major 3 x 4 (an affine's first three rows). Empty for
  // kinds without geometry.
  virtual std::vector<double> Affine(size_t i, uint32_t file) const { return {}; }
  // Where samples' array `file` lies as rows in memory, sorted by first,
  // for whole-sample copies without a read per sample (server/serve/row_gather.h).
  // Samples outside every span (folders, volumes, datasets read by
  // hyperslab) are read by ReadArray. None by default.
  virtual std::vector<RowSpan> RowSpans(uint32_t file) const { return {}; }
  // ReadArray of the sample's first array.
  absl::Status Read(size_t i, const uint64_t* start, const uint64_t* count, ElemType to,
                    uint8_t* dst) const {
    return ReadArray(i, 0, start, count, to, dst);
  }
};

// The foreground of the `elements` elements of type `t` at `data`.
Foreground ScanForeground(const uint8_t* data, ElemType t, uint64_t elements);

// RESOURCE_EXHAUSTED for more than `max_samples` rows, FAILED_PRECONDITION
// for rows of no elements (`row_shape` holding a 0), naming `path`.
absl::Status CheckRows(uint64_t rows, const std::vector<uint64_t>& row_shape,
                       uint64_t max_samples, const std::string& path);

// One source whose samples are the rows of `parts`, one after another (a
// folder of feature files, rows addressed across files). Every part has
// the same element type, else FAILED_PRECONDITION naming `names[k]` (the
// part's file); RESOURCE_EXHAUSTED for more than `max_samples` rows in all.
// Sample i is part k's sample i - (rows of parts 0..k-1): its shape,
// label, name and reads are the part's.
absl::StatusOr<std::shared_ptr<const ArraySource>> ConcatArrays(
    std::vector<std::shared_ptr<const ArraySource>> parts, const std::vector<std::string>& names,
    uint64_t max_samples, const std::string& path);

// `source` with each sample repeated `n` times in a row: sample i is
// source's sample i / n (its shape, label, name and reads), so an epoch
// draws n patches of every volume (TorchIO's samples_per_volume, MONAI's
// num_samples; each draw is its own index's). RESOURCE_EXHAUSTED for more
// than `max_samples` in all, naming `path`.
absl::StatusOr<std::shared_ptr<const ArraySource>> RepeatArrays(
    std::shared_ptr<const ArraySource> source, uint32_t n, uint64_t max_samples,
    const std::string& path);

// A Dataset over an array source (its `source`): one Sample per array
// sample (its Name and label), the list charged to limits.charge_list
// (ListCharge). FAILED_PRECONDITION for a label outside 0..2^31-1.
absl::StatusOr<Dataset> ArrayDataset(std::shared_ptr<const ArraySource> source,
                                     std::string description,
                                     const ScanLimits& limits = {});

}  // namespace stoker

#endif  // STOKER_SERVER_DATASET_ARRAY_SOURCE_H_
