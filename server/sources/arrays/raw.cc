// The `raw` source: fixed-size records in one binary file, as np.memmap
// and tokenizers write them (nanoGPT's train.bin, a C array on disk).
// After `header_bytes`, the file is consecutive records of `shape`
// little-endian elements of `dtype`; sample i is record i, its label 0.
// The file is mapped through the caller's confinement and held in RAM as
// far as the caller's budget allows, as an .npy file is (arrays/npy.h).
//
// Errors name the file: INVALID_ARGUMENT for a dtype the element table
// does not name, no shape, or more than kMaxArrayDims dimensions;
// FAILED_PRECONDITION for a record of no elements, one whose size
// overflows, a header that is not a whole number of elements (they would
// lie unaligned), or a file that is shorter than its header or does not
// end on a record's boundary (both sizes named); RESOURCE_EXHAUSTED past the
// daemon's sample limit; the file environment's errors for the file.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/dataset/array_source.h"
#include "server/sources/source.h"
#include "util/checked_math.h"
#include "util/status_macros.h"

namespace stoker {
namespace {

class RawRecords : public ArraySource {
 public:
  RawRecords(std::string path, std::shared_ptr<const Mapping> map, uint64_t offset,
             ElemType type, std::vector<uint64_t> shape, uint64_t record_bytes, uint64_t rows)
      : path_(std::move(path)),
        map_(std::move(map)),
        offset_(offset),
        type_(type),
        shape_(std::move(shape)),
        record_bytes_(record_bytes),
        rows_(rows) {}

  size_t size() const override { return rows_; }
  ElemType type() const override { return type_; }
  const std::vector<uint64_t>& shape(size_t) const override { return shape_; }
  int64_t label(size_t) const override { return 0; }
  std::string Name(size_t i) const override { return absl::StrCat(path_, "[", i, "]"); }
  absl::Status ReadArray(size_t i, uint32_t, const uint64_t* start, const uint64_t* count,
                         ElemType to, uint8_t* dst) const override {
    return MappedCopyRegion(Name(i), map_->data + offset_ + i * record_bytes_, type_, shape_,
                            start, count, dst, to);
  }
  std::vector<RowSpan> RowSpans(uint32_t) const override {
    return {RowSpan{0, rows_, map_->data + offset_, record_bytes_, type_, &shape_,
                    !map_->resident}};
  }

 private:
  const std::string path_;
  const std::shared_ptr<const Mapping> map_;
  const uint64_t offset_;
  const ElemType type_;
  const std::vector<uint64_t> shape_;
  const uint64_t record_bytes_, rows_;
};

absl::StatusOr<ElemType> TypeNamed(const std::string& name, const std::string& path) {
  std::vector<std::string> names;
  for (const shm::DTypeInfo& t : shm::kElemTypes) {
    if (name == t.name) return t.type;
    names.push_back(t.name);
  }
  return absl::InvalidArgumentError(absl::StrCat("raw ", path, ": dtype \"", name,
                                                 "\" is none of ", absl::StrJoin(names, ", ")));
}

class RawKind : public SourceKind {
 public:
  v1::DatasetSpec::SourceCase source_case() const override { return v1::DatasetSpec::kRaw; }
  absl::StatusOr<Dataset> Open(const v1::DatasetSpec& spec,
                               const SourceContext& ctx) const override {
    const v1::RawSource& raw = spec.raw();
    const std::string& path = raw.path();
    STOKER_ASSIGN_OR_RETURN(ElemType type, TypeNamed(raw.dtype(), path));
    const std::vector<uint64_t> shape(raw.shape().begin(), raw.shape().end());
    if (shape.empty() || shape.size() > kMaxArrayDims) {
      return absl::InvalidArgumentError(absl::StrCat(
          "raw ", path, ": shape needs 1 to ", kMaxArrayDims, " dimensions (one record's)"));
    }
    STOKER_RETURN_IF_ERROR(CheckRows(0, shape, 0, path));  // No dimension of 0.
    STOKER_ASSIGN_OR_RETURN(uint64_t record_bytes,
                            CheckedProduct(shape, ElemBytes(type), UINT64_MAX, "raw " + path));
    STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const Mapping> map,
                            MapFile(path, ctx.beneath.get()));
    if (raw.header_bytes() % ElemBytes(type) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "raw ", path, ": a ", raw.header_bytes(), "-byte header leaves the ", ElemName(type),
          " elements unaligned (it must be a multiple of ", ElemBytes(type), " bytes)"));
    }
    const uint64_t size = map->size;
    if (raw.header_bytes() > size || (size - raw.header_bytes()) % record_bytes != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "raw ", path, ": ", size, " bytes are not a ", raw.header_bytes(),
          "-byte header and whole records of ", record_bytes, " bytes (shape ",
          absl::StrJoin(shape, "x"), " of ", ElemName(type), ")"));
    }
    const uint64_t rows = (size - raw.header_bytes()) / record_bytes;
    STOKER_RETURN_IF_ERROR(CheckRows(rows, shape, ctx.limits.max_files, path));
    if (rows == 0) {
      return absl::FailedPreconditionError(absl::StrCat("raw ", path, ": holds no records"));
    }
    auto records = std::make_shared<RawRecords>(path, Resident(std::move(map), ctx.charge),
                                                raw.header_bytes(), type, shape, record_bytes,
                                                rows);
    return ArrayDataset(std::move(records), absl::StrCat("raw:", path), ctx.limits);
  }
};

}  // namespace

STOKER_DEFINE_SOURCE(RawSourceKind, RawKind)

}  // namespace stoker
