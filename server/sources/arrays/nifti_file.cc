#include "server/sources/arrays/nifti_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>

#include "absl/strings/str_cat.h"
#include "server/sources/arrays/gzip_stream.h"
#include "util/checked_math.h"
#include "util/file_kinds.h"
#include "util/status_macros.h"

namespace stoker {
namespace nifti {
namespace {

constexpr size_t kHeader1 = 348, kHeader2 = 540;
// Where a single-file volume's voxels start at the earliest: the header
// and the 4-byte extension flag (NIfTI-1: 352, NIfTI-2: 544).
constexpr uint64_t kFirstVoxel1 = 352, kFirstVoxel2 = 544;
// What ReadHeader reads of a file: its header, with room for a gzip
// header's name and comment fields before it.
constexpr size_t kHeadRead = 64 << 10;

absl::Status Bad(const std::string& why) { return absl::FailedPreconditionError(why); }

template <typename T>
T At(const uint8_t* p, size_t offset) {
  T v;
  std::memcpy(&v, p + offset, sizeof(T));
  return v;
}

uint32_t Swap32(uint32_t v) { return __builtin_bswap32(v); }

absl::StatusOr<ElemType> TypeOf(int code) {
  switch (code) {
    case 2: return ElemType::kUint8;
    case 4: return ElemType::kInt16;
    case 8: return ElemType::kInt32;
    case 16: return ElemType::kFloat32;
    case 64: return ElemType::kFloat64;
    case 256: return ElemType::kInt8;
    case 512: return ElemType::kUint16;
    case 768: return ElemType::kUint32;
    case 1024: return ElemType::kInt64;
    case 1280: return ElemType::kUint64;
    case 1: return Bad("datatype 1 (binary, a bit per voxel) is not an array of numbers");
    case 32: case 1792: case 2048:
      return Bad(absl::StrCat("datatype ", code, " is complex, not an array of real numbers"));
    case 128: case 2304:
      return Bad(absl::StrCat("datatype ", code, " is RGB(A), not an array of numbers"));
    case 1536: return Bad("datatype 1536 (128-bit float) is not supported");
    default: return Bad(absl::StrCat("datatype ", code, " is unknown"));
  }
}

// nibabel's quaternion to rotation (nibabel.quaternions.quat2mat), the
// scalar part filled in from the other three.
void QuaternionRotation(double b, double c, double d, double r[9]) {
  const double w2 = 1.0 - (b * b + c * c + d * d);
  const double a = w2 > 0 ? std::sqrt(w2) : 0.0;
  const double n = a * a + b * b + c * c + d * d;
  if (n < 1e-12) {
    const double id[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    std::memcpy(r, id, sizeof(id));
    return;
  }
  const double s = 2.0 / n;
  const double X = b * s, Y = c * s, Z = d * s;
  const double wX = a * X, wY = a * Y, wZ = a * Z;
  const double xX = b * X, xY = b * Y, xZ = b * Z;
  const double yY = c * Y, yZ = c * Z, zZ = d * Z;
  const double m[9] = {1.0 - (yY + zZ), xY - wZ,         xZ + wY,
                       xY + wZ,         1.0 - (xX + zZ), yZ - wX,
                       xZ - wY,         yZ + wX,         1.0 - (xX + yY)};
  std::memcpy(r, m, sizeof(m));
}

// The fields both versions share, read at their own offsets and widths.
struct Fields {
  int64_t dim[8];
  int datatype;
  double pixdim[8];
  double vox_offset, slope, inter;
  int qform_code, sform_code;
  double quatern[3], qoffset[3], srow[12];
};

// Where each version keeps those fields, and how wide they are.
struct Layout {
  int int_bytes;       // dim[]: 2 or 8.
  int code_bytes;      // qform_code, sform_code: 2 or 4.
  bool doubles;        // pixdim, scaling, quaternion, srow: float or double.
  bool int_offset;     // vox_offset: an int64 (NIfTI-2) or a float.
  size_t dim, datatype, pixdim, vox_offset, slope, inter, qform, sform, quatern, qoffset, srow;
};
constexpr Layout kLayout1 = {2, 2, false, false, 40, 70, 76, 108, 112, 116, 252, 254, 256, 268, 280};
constexpr Layout kLayout2 = {8, 4, true, true, 16, 12, 104, 168, 176, 184, 344, 348, 352, 376, 400};

int64_t Int(const uint8_t* p, size_t at, int bytes) {
  return bytes == 2 ? At<int16_t>(p, at) : bytes == 4 ? At<int32_t>(p, at) : At<int64_t>(p, at);
}

Fields ReadFields(const uint8_t* p, const Layout& l) {
  auto at_real = [&](size_t at, int k) {
    return l.doubles ? At<double>(p, at + 8 * k) : At<float>(p, at + 4 * k);
  };
  Fields f;
  for (int k = 0; k < 8; ++k) {
    f.dim[k] = Int(p, l.dim + l.int_bytes * k, l.int_bytes);
    f.pixdim[k] = at_real(l.pixdim, k);
  }
  f.datatype = At<int16_t>(p, l.datatype);
  f.vox_offset = l.int_offset ? static_cast<double>(At<int64_t>(p, l.vox_offset))
                              : At<float>(p, l.vox_offset);
  f.slope = at_real(l.slope, 0);
  f.inter = at_real(l.inter, 0);
  f.qform_code = static_cast<int>(Int(p, l.qform, l.code_bytes));
  f.sform_code = static_cast<int>(Int(p, l.sform, l.code_bytes));
  for (int k = 0; k < 3; ++k) {
    f.quatern[k] = at_real(l.quatern, k);
    f.qoffset[k] = at_real(l.qoffset, k);
  }
  for (int k = 0; k < 12; ++k) f.srow[k] = at_real(l.srow, k);
  return f;
}

std::array<double, 12> AffineOf(const Fields& f, const std::vector<uint64_t>& shape) {
  std::array<double, 12> a{};
  if (f.sform_code > 0) {
    std::copy(f.srow, f.srow + 12, a.begin());
    return a;
  }
  if (f.qform_code > 0) {
    double r[9];
    QuaternionRotation(f.quatern[0], f.quatern[1], f.quatern[2], r);
    const double zoom[3] = {f.pixdim[1], f.pixdim[2], f.pixdim[3] * (f.pixdim[0] < 0 ? -1 : 1)};
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) a[4 * i + j] = r[3 * i + j] * zoom[j];
      a[4 * i + 3] = f.qoffset[i];
    }
    return a;
  }
  // nibabel's shape_zoom_affine(shape, zooms, x_flip=True).
  for (int i = 0; i < 3; ++i) {
    const double n = i < static_cast<int>(shape.size()) ? static_cast<double>(shape[i]) : 1;
    double zoom = i < static_cast<int>(shape.size()) ? f.pixdim[i + 1] : 1;
    if (i == 0) zoom = -zoom;
    a[4 * i + i] = zoom;
    a[4 * i + 3] = -((n - 1) / 2.0) * zoom;
  }
  return a;
}

// Conversion of one stored voxel into a decoded one.
template <typename S, typename D, bool kScaled>
struct Convert {
  double slope, inter;
  D operator()(const uint8_t* p) const {
    S s;
    std::memcpy(&s, p, sizeof(S));
    if constexpr (kScaled) {
      return static_cast<D>(static_cast<double>(s) * slope + inter);
    } else {
      return static_cast<D>(s);
    }
  }
};

// Fortran-order `shape` at src into out, element (i0, ..., in-1) at
// sum(i_k * dst[k]): items are (middle index combination, block of x), each
// a tiled 2-D transpose between x (the source's contiguous axis) and the
// last axis (the output's, when the strides are a whole volume's C order).
template <typename S, typename D, bool kScaled>
void ReorderTyped(const uint8_t* src, const std::vector<uint64_t>& shape,
                  const std::vector<uint64_t>& dst, const Header& h,
                  const VolumeCache::Parallel& parallel, uint8_t* out_bytes) {
  const Convert<S, D, kScaled> conv{h.slope, h.inter};
  D* out = reinterpret_cast<D*>(out_bytes);
  const size_t n = shape.size();
  const auto longer = std::count_if(shape.begin(), shape.end(), [](uint64_t d) { return d > 1; });
  if (n <= 1 || longer <= 1) {  // One axis: a (strided) copy.
    uint64_t total = 1, stride = 1;
    for (size_t k = 0; k < n; ++k) {
      total *= shape[k];
      if (shape[k] > 1) stride = dst[k];
    }
    constexpr uint64_t kBlock = 1 << 20;
    parallel((total + kBlock - 1) / kBlock, [&](size_t b) {
      const uint64_t end = std::min<uint64_t>(total, (b + 1) * kBlock);
      for (uint64_t i = b * kBlock; i < end; ++i) out[i * stride] = conv(src + i * sizeof(S));
    });
    return;
  }
  std::vector<uint64_t> src_stride(n);
  src_stride[0] = 1;
  for (size_t k = 1; k < n; ++k) src_stride[k] = src_stride[k - 1] * shape[k - 1];
  uint64_t middles = 1;
  for (size_t k = 1; k + 1 < n; ++k) middles *= shape[k];
  constexpr uint64_t kXBlock = 64, kTile = 16;
  const uint64_t nx = shape[0], nz = shape[n - 1];
  const uint64_t x_blocks = (nx + kXBlock - 1) / kXBlock;
  const uint64_t sz = src_stride[n - 1], dx = dst[0], dz = dst[n - 1];
  parallel(middles * x_blocks, [&](size_t item) {
    uint64_t m = item / x_blocks, s0 = 0, d0 = 0;
    for (size_t k = n - 1; k-- > 1;) {  // Middle axes, the last varying fastest.
      const uint64_t i = m % shape[k];
      m /= shape[k];
      s0 += i * src_stride[k];
      d0 += i * dst[k];
    }
    const uint64_t x0 = (item % x_blocks) * kXBlock, x1 = std::min(nx, x0 + kXBlock);
    for (uint64_t z0 = 0; z0 < nz; z0 += kTile) {
      const uint64_t z1 = std::min(nz, z0 + kTile);
      for (uint64_t xt = x0; xt < x1; xt += kTile) {
        const uint64_t xe = std::min(x1, xt + kTile);
        for (uint64_t x = xt; x < xe; ++x) {
          D* o = out + d0 + x * dx;
          const uint8_t* s = src + (s0 + x) * sizeof(S);
          if (dz == 1) {
            for (uint64_t z = z0; z < z1; ++z) o[z] = conv(s + z * sz * sizeof(S));
          } else {
            for (uint64_t z = z0; z < z1; ++z) o[z * dz] = conv(s + z * sz * sizeof(S));
          }
        }
      }
    }
  });
}

template <typename S>
void ReorderFrom(const uint8_t* src, const std::vector<uint64_t>& shape,
                 const std::vector<uint64_t>& dst, const Header& h,
                 const VolumeCache::Parallel& parallel, uint8_t* out) {
  if (!h.scaled) return ReorderTyped<S, S, false>(src, shape, dst, h, parallel, out);
  if (h.type == ElemType::kFloat64)
    return ReorderTyped<S, double, true>(src, shape, dst, h, parallel, out);
  return ReorderTyped<S, float, true>(src, shape, dst, h, parallel, out);
}

// ReorderFrom for h.stored.
void ReorderStored(const uint8_t* src, const std::vector<uint64_t>& shape,
                   const std::vector<uint64_t>& dst, const Header& h,
                   const VolumeCache::Parallel& parallel, uint8_t* out) {
  switch (h.stored) {
    case ElemType::kUint8: return ReorderFrom<uint8_t>(src, shape, dst, h, parallel, out);
    case ElemType::kInt8: return ReorderFrom<int8_t>(src, shape, dst, h, parallel, out);
    case ElemType::kInt16: return ReorderFrom<int16_t>(src, shape, dst, h, parallel, out);
    case ElemType::kUint16: return ReorderFrom<uint16_t>(src, shape, dst, h, parallel, out);
    case ElemType::kInt32: return ReorderFrom<int32_t>(src, shape, dst, h, parallel, out);
    case ElemType::kUint32: return ReorderFrom<uint32_t>(src, shape, dst, h, parallel, out);
    case ElemType::kInt64: return ReorderFrom<int64_t>(src, shape, dst, h, parallel, out);
    case ElemType::kUint64: return ReorderFrom<uint64_t>(src, shape, dst, h, parallel, out);
    case ElemType::kFloat32: return ReorderFrom<float>(src, shape, dst, h, parallel, out);
    case ElemType::kFloat64: return ReorderFrom<double>(src, shape, dst, h, parallel, out);
    default: return;  // ParseHeader gives no other type.
  }
}

// C-order strides (in elements) of `shape`.
std::vector<uint64_t> RowMajorStrides(const std::vector<uint64_t>& shape) {
  std::vector<uint64_t> dst(shape.size(), 1);
  for (size_t k = shape.size(); k-- > 1;) dst[k - 1] = dst[k] * shape[k];
  return dst;
}

// A volume's stored voxels as slabs, in the file's order: whole rows of
// `axis`, the slowest axis one of whose rows (one index of it, every index
// of the faster axes) fits kSlabBytes; `rows` of them a slab (fewer at the
// axis's end). Each slab is reordered into its place as it comes, so a
// decode holds one slab besides the volume.
class Slabs {
 public:
  static constexpr uint64_t kSlabBytes = 4 << 20;

  explicit Slabs(const Header& h) : h_(h), dst_(RowMajorStrides(h.shape)) {
    const size_t n = h.shape.size();
    elem_ = ElemBytes(h.stored);
    axis_ = n - 1;
    row_ = 1;
    for (size_t k = 0; k + 1 < n; ++k) row_ *= h.shape[k];
    while (axis_ > 0 && row_ * elem_ > kSlabBytes) row_ /= h.shape[--axis_];
    rows_ = std::clamp<uint64_t>(kSlabBytes / (row_ * elem_), 1, h.shape[axis_]);
  }
  uint64_t most_bytes() const { return rows_ * row_ * elem_; }

  // Calls fill(buffer, bytes) for each slab in turn (the next `bytes` of
  // the stored voxels into `buffer`), then reorders it into `out`.
  absl::Status Each(const VolumeCache::Parallel& parallel, uint8_t* out,
                    const std::function<absl::Status(uint8_t*, uint64_t)>& fill) const {
    const std::vector<uint64_t>& shape = h_.shape;
    const size_t n = shape.size();
    std::unique_ptr<uint8_t[]> slab(new uint8_t[most_bytes()]);
    std::vector<uint64_t> outer(n, 0);  // Indices of the axes past axis_.
    std::vector<uint64_t> sub(shape.begin(), shape.begin() + axis_ + 1);
    const std::vector<uint64_t> dst(dst_.begin(), dst_.begin() + axis_ + 1);
    const uint64_t out_elem = ElemBytes(h_.type);
    for (;;) {
      uint64_t base = 0;
      for (size_t k = axis_ + 1; k < n; ++k) base += outer[k] * dst_[k];
      for (uint64_t j = 0; j < shape[axis_]; j += rows_) {
        sub[axis_] = std::min(rows_, shape[axis_] - j);
        STOKER_RETURN_IF_ERROR(fill(slab.get(), sub[axis_] * row_ * elem_));
        ReorderStored(slab.get(), sub, dst, h_, parallel,
                      out + (base + j * dst_[axis_]) * out_elem);
      }
      size_t k = axis_ + 1;  // The next outer index, Fortran order.
      for (; k < n && ++outer[k] == shape[k]; ++k) outer[k] = 0;
      if (k >= n) return absl::OkStatus();
    }
  }

 private:
  const Header& h_;
  const std::vector<uint64_t> dst_;
  uint64_t elem_ = 1, row_ = 1, rows_ = 1;
  size_t axis_ = 0;
};

struct Fd {
  int fd;
  ~Fd() { close(fd); }
};

// The most a gzip of `bytes` bytes can hold: deflate's stored blocks (5
// bytes per 65,535) and generous room for members' headers.
uint64_t MostGzipBytes(uint64_t bytes) { return bytes + bytes / 8192 * 5 + (1 << 20); }

}  // namespace

bool IsGzip(const uint8_t* data, size_t size) {
  return GzipHead(absl::string_view(reinterpret_cast<const char*>(data), size));
}

absl::StatusOr<Header> ParseHeader(const uint8_t* p, size_t size) {
  if (size < 4) return Bad("not a NIfTI file (shorter than its header)");
  const uint32_t sizeof_hdr = At<uint32_t>(p, 0);
  if (Swap32(sizeof_hdr) == kHeader1 || Swap32(sizeof_hdr) == kHeader2)
    return Bad("a big-endian NIfTI file (convert it to little-endian, e.g. with nibabel)");
  Header h;
  Fields f;
  if (sizeof_hdr == kHeader1) {
    if (size < kHeader1) return Bad("a NIfTI-1 header shorter than 348 bytes");
    if (std::memcmp(p + 344, "ni1\0", 4) == 0)
      return Bad("a NIfTI-1 header of a two-file pair (.hdr/.img): store it as one .nii");
    if (std::memcmp(p + 344, "n+1\0", 4) != 0) return Bad("not a NIfTI-1 file (no n+1 magic)");
    f = ReadFields(p, kLayout1);
  } else if (sizeof_hdr == kHeader2) {
    if (size < kHeader2) return Bad("a NIfTI-2 header shorter than 540 bytes");
    if (std::memcmp(p + 4, "ni2\0", 4) == 0)
      return Bad("a NIfTI-2 header of a two-file pair (.hdr/.img): store it as one .nii");
    if (std::memcmp(p + 4, "n+2\0\r\n\032\n", 8) != 0)
      return Bad("not a NIfTI-2 file (no n+2 magic)");
    h.version = 2;
    f = ReadFields(p, kLayout2);
  } else {
    return Bad("not a NIfTI file (its first field is neither 348 nor 540)");
  }
  if (f.dim[0] < 1 || f.dim[0] > 7)
    return Bad(absl::StrCat("dim[0] is ", f.dim[0], ", not 1..7 dimensions"));
  for (int k = 1; k <= f.dim[0]; ++k) {
    if (f.dim[k] < 1) return Bad(absl::StrCat("dim[", k, "] is ", f.dim[k]));
    h.shape.push_back(static_cast<uint64_t>(f.dim[k]));
  }
  STOKER_ASSIGN_OR_RETURN(h.stored, TypeOf(f.datatype));
  STOKER_ASSIGN_OR_RETURN(h.data_bytes,
                          CheckedProduct(h.shape, ElemBytes(h.stored), kMostVolumeBytes, "NIfTI"));
  const uint64_t first = h.version == 1 ? kFirstVoxel1 : kFirstVoxel2;
  if (!(f.vox_offset >= 0 && f.vox_offset < 9e15) || f.vox_offset != std::floor(f.vox_offset))
    return Bad(absl::StrCat("vox_offset ", f.vox_offset, " is not a byte offset"));
  // 0 (or inside the header) means right after it, as nibabel reads it.
  h.data_offset = std::max(first, static_cast<uint64_t>(f.vox_offset));
  if (h.data_offset - first > kMostExtensionBytes)
    return Bad(absl::StrCat("vox_offset ", h.data_offset, " leaves ", h.data_offset - first,
                            " bytes of extensions after the header, more than ",
                            kMostExtensionBytes));
  if (std::isfinite(f.slope) && f.slope != 0) {
    if (!std::isfinite(f.inter)) return Bad("scl_slope is set but scl_inter is not finite");
    h.slope = f.slope;
    h.inter = f.inter;
    h.scaled = !(f.slope == 1 && f.inter == 0);
  }
  h.type = !h.scaled ? h.stored
                     : h.stored == ElemType::kFloat64 ? ElemType::kFloat64 : ElemType::kFloat32;
  h.volume_bytes = h.data_bytes / ElemBytes(h.stored) * ElemBytes(h.type);
  h.affine = AffineOf(f, h.shape);
  return h;
}

absl::StatusOr<Header> ReadHeader(const std::string& path, const Beneath* beneath,
                                  FileVersion* version) {
  struct stat st;
  STOKER_ASSIGN_OR_RETURN(const int raw_fd, OpenConfined(path, O_RDONLY, beneath, &st));
  const Fd fd{raw_fd};
  std::vector<uint8_t> head(std::min<uint64_t>(kHeadRead, static_cast<uint64_t>(st.st_size)));
  int err = 0;
  if (!ReadAt(fd.fd, 0, head.size(), head.data(), &err))
    return absl::DataLossError(absl::StrCat(path, ": cannot read its header"));
  absl::StatusOr<Header> h;
  if (IsGzip(head.data(), head.size())) {
    uint8_t inflated[kHeader2];
    GzipStream gz(fd.fd, static_cast<uint64_t>(st.st_size), path);
    absl::StatusOr<size_t> got = gz.Read(inflated, sizeof(inflated));
    if (!got.ok()) return Bad(std::string(got.status().message()));
    h = ParseHeader(inflated, *got);
    if (h.ok() && MostGzipBytes(h->data_offset + h->data_bytes) < static_cast<uint64_t>(st.st_size))
      return Bad(absl::StrCat(path, ": ", st.st_size, " bytes, more than a gzip of its ",
                              h->data_offset + h->data_bytes, "-byte volume can be"));
  } else {
    h = ParseHeader(head.data(), head.size());
    if (h.ok() && !RangeWithin(h->data_offset, h->data_bytes, static_cast<uint64_t>(st.st_size)))
      return Bad(absl::StrCat(path, ": holds ", st.st_size, " bytes, its header declares "
                              "voxels up to byte ", h->data_offset + h->data_bytes));
  }
  if (!h.ok()) return Bad(absl::StrCat(path, ": ", h.status().message()));
  h->gzip = IsGzip(head.data(), head.size());
  if (version != nullptr) *version = VersionOf(st);
  return h;
}

void Reorder(const uint8_t* src, const std::vector<uint64_t>& shape, const Header& h,
             const VolumeCache::Parallel& parallel, uint8_t* out) {
  ReorderStored(src, shape, RowMajorStrides(shape), h, parallel, out);
}

absl::Status Decode(const std::string& path, const Beneath* beneath, const Header& h,
                    const FileVersion& version, const VolumeCache::Parallel& parallel,
                    uint8_t* out) {
  struct stat st;
  STOKER_ASSIGN_OR_RETURN(const int raw_fd, OpenConfined(path, O_RDONLY, beneath, &st));
  const Fd fd{raw_fd};
  auto changed = [&] {
    return absl::DataLossError(absl::StrCat(path, ": changed since the dataset was opened"));
  };
  if (!VersionOf(st).SameFileAs(version)) return changed();
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const uint64_t want = h.data_offset + h.data_bytes;
  int err = 0;
  const Slabs slabs(h);
  if (!h.gzip) {
    uint64_t at = h.data_offset;
    return slabs.Each(parallel, out, [&](uint8_t* slab, uint64_t n) {
      if (!ReadAt(fd.fd, at, n, slab, &err)) return changed();
      at += n;
      return absl::OkStatus();
    });
  }
  if (size > MostGzipBytes(want))
    return absl::ResourceExhaustedError(absl::StrCat(
        path, ": ", size, " bytes, more than a gzip of its ", want, "-byte volume can be"));
  GzipStream gz(fd.fd, size, path);
  auto short_at = [&](uint64_t got) {
    return absl::DataLossError(absl::StrCat(path, ": inflates to ", got, " bytes, its header "
                                            "declares ", want));
  };
  const size_t header_bytes = h.version == 1 ? kHeader1 : kHeader2;
  uint8_t head[kHeader2];
  STOKER_ASSIGN_OR_RETURN(const size_t got, gz.Read(head, header_bytes));
  if (got < header_bytes) return short_at(got);
  absl::StatusOr<Header> again = ParseHeader(head, header_bytes);
  if (!again.ok() || again->shape != h.shape || again->stored != h.stored ||
      again->data_offset != h.data_offset || again->slope != h.slope || again->inter != h.inter)
    return changed();
  STOKER_ASSIGN_OR_RETURN(const uint64_t skipped, gz.Skip(h.data_offset - header_bytes));
  uint64_t at = header_bytes + skipped;
  if (at < h.data_offset) return short_at(at);
  STOKER_RETURN_IF_ERROR(slabs.Each(parallel, out, [&](uint8_t* slab, uint64_t n) {
    STOKER_ASSIGN_OR_RETURN(const size_t read, gz.Read(slab, n));
    at += read;
    return read < n ? short_at(at) : absl::OkStatus();
  }));
  STOKER_ASSIGN_OR_RETURN(const bool ends, gz.MemberEndsHere());
  if (!ends)
    return absl::DataLossError(absl::StrCat(path, ": inflates to more than the ", want,
                                            " bytes its header declares"));
  return absl::OkStatus();
}

absl::Status ReadRegion(const std::string& what, const Mapping& file, const Header& h,
                        const uint64_t* start, const uint64_t* count, ElemType to,
                        uint8_t* dst) {
  if (!RangeWithin(h.data_offset, h.data_bytes, file.size))
    return absl::DataLossError(absl::StrCat(what, ": the file no longer holds its voxels"));
  // The region in the file's order (the axes reversed), then reordered.
  const size_t n = h.shape.size();
  std::vector<uint64_t> shape_f(h.shape.rbegin(), h.shape.rend()), start_f(n), count_f(n);
  std::vector<uint64_t> counts(count, count + n);
  uint64_t voxels = 1;
  for (size_t k = 0; k < n; ++k) {
    start_f[k] = start[n - 1 - k];
    count_f[k] = count[n - 1 - k];
    voxels *= count[k];
  }
  std::vector<uint8_t> stored(voxels * ElemBytes(h.stored));
  STOKER_RETURN_IF_ERROR(MappedCopyRegion(what, file.data + h.data_offset, h.stored, shape_f,
                                          start_f.data(), count_f.data(), stored.data(),
                                          h.stored));
  std::vector<uint8_t> typed(voxels * ElemBytes(h.type));
  Reorder(stored.data(), counts, h, &VolumeCache::Serial, typed.data());
  const std::vector<uint64_t> origin(n, 0);
  CopyRegion(typed.data(), h.type, counts, origin.data(), count, dst, to);
  return absl::OkStatus();
}

}  // namespace nifti
}  // namespace stoker
