#include "server/sources/arrays/npy.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/sources/source.h"
#include "util/checked_math.h"
#include "util/file_kinds.h"
#include "util/status_macros.h"

namespace stoker {
namespace {

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
  if (h.shape.size() != 1 || h.shape[0] != n || shm::Elem(h.type).is_float()) {
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
  absl::Status ReadArray(size_t i, uint32_t, const uint64_t* start, const uint64_t* count,
                         ElemType to, uint8_t* dst) const override {
    if (absl::Status b = Broken(i); !b.ok()) return b;
    const NpyFile& f = single_ ? files_[0] : files_[i];
    const uint8_t* base = f.map->data + f.header.data_offset;
    if (single_) base += i * RowBytes();
    return MappedCopyRegion(Name(i), base, f.header.type, shape(i), start, count, dst, to);
  }
  std::vector<RowSpan> RowSpans(uint32_t) const override {
    if (!single_) return {};
    const NpyFile& f = files_[0];
    return {RowSpan{0, rows_, f.map->data + f.header.data_offset,
                    RowBytes(), f.header.type, &row_shape_,
                    !f.map->resident}};
  }

  // Bytes of one row of a single file, as stored.
  uint64_t RowBytes() const { return Elements(row_shape_) * ElemBytes(type_); }

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

absl::StatusOr<NpyHeader> ParseNpyHeader(const uint8_t* data, size_t size) {
  if (size < 10 || !NpyHead(absl::string_view(reinterpret_cast<const char*>(data), size)))
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

absl::StatusOr<std::shared_ptr<const ArraySource>> OpenNpySource(
    const std::string& path, const std::string& labels,
    std::shared_ptr<const Beneath> beneath, const ChargeRam& charge,
    uint64_t max_samples) {
  auto src = std::make_shared<NpySource>();
  src->beneath_ = beneath;
  absl::StatusOr<std::vector<std::string>> entries =
      ListFolder(path, beneath.get(), max_samples);
  if (entries.ok()) {
    std::vector<std::string> names;
    for (const std::string& name : *entries) {
      const std::string file = InFolder(path, name);
      if (NpyName(name) || NpyHead(ReadHead(file, beneath.get(), kKindHeadBytes).value_or("")))
        names.push_back(file);
    }
    if (names.empty()) return Bad(path, "holds no .npy files (named so in any case, or by content)");
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
    if (entries.status().code() != absl::StatusCode::kFailedPrecondition)
      return entries.status();  // Not found, outside the confinement.
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

namespace {

class NpyKind : public SourceKind {
 public:
  v1::DatasetSpec::SourceCase source_case() const override { return v1::DatasetSpec::kNpy; }
  absl::StatusOr<Dataset> Open(const v1::DatasetSpec& spec,
                               const SourceContext& ctx) const override {
    STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const ArraySource> arrays,
                            OpenNpySource(spec.npy().path(), spec.npy().labels(), ctx.beneath,
                                          ctx.charge, ctx.limits.max_files));
    return ArrayDataset(std::move(arrays), absl::StrCat("npy:", spec.npy().path()), ctx.limits);
  }
};

}  // namespace

STOKER_DEFINE_SOURCE(NpySourceKind, NpyKind)

}  // namespace stoker
