#include "server/h5probe/describe.h"

#include <unistd.h>

#include <hdf5/serial/H5FDpublic.h>
#include <hdf5/serial/H5PLpublic.h>
#include <hdf5/serial/hdf5.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace stoker {
namespace h5probe {
namespace {

// ---- A read-only driver over one descriptor. ----------------------------
// The file "name" given to H5Fopen is "/" and the descriptor's number (an
// absolute name, so libhdf5 never asks for the working folder); its size
// is the daemon's fstat of it (the reader makes no stat call).

uint64_t g_size = 0;  // Of the file being described.

// Where a chunk lies, learnt by reading it: libhdf5 1.10 finds a chunk by
// its coordinates in O(log n) only on the way to reading it (its
// get_chunk_info calls walk the whole index, O(n) each), so the reader asks
// for each chunk's raw bytes and this driver, instead of reading them,
// notes the address and size it was asked for.
struct Locate {
  bool on = false;
  haddr_t addr = HADDR_UNDEF;
  size_t size = 0;
} g_locate;

struct FdFile {
  H5FD_t pub;  // First: libhdf5 casts between the two.
  int fd;
  haddr_t eoa;
};

H5FD_t* FdOpen(const char* name, unsigned flags, hid_t, haddr_t) {
  int fd = -1;
  if ((flags & H5F_ACC_RDWR) || name[0] != '/' || !absl::SimpleAtoi(name + 1, &fd) || fd < 0)
    return nullptr;
  auto* f = static_cast<FdFile*>(std::calloc(1, sizeof(FdFile)));
  if (f == nullptr) return nullptr;
  f->fd = fd;
  return &f->pub;
}

herr_t FdClose(H5FD_t* file) {
  std::free(file);  // The descriptor is the caller's.
  return 0;
}

haddr_t FdGetEoa(const H5FD_t* file, H5FD_mem_t) {
  return reinterpret_cast<const FdFile*>(file)->eoa;
}

herr_t FdSetEoa(H5FD_t* file, H5FD_mem_t, haddr_t addr) {
  reinterpret_cast<FdFile*>(file)->eoa = addr;
  return 0;
}

haddr_t FdGetEof(const H5FD_t*, H5FD_mem_t) { return g_size; }

herr_t FdRead(H5FD_t* file, H5FD_mem_t type, hid_t, haddr_t addr, size_t size, void* buf) {
  const FdFile* f = reinterpret_cast<const FdFile*>(file);
  if (addr == HADDR_UNDEF || addr > f->eoa || size > f->eoa - addr) return -1;
  if (g_locate.on && type == H5FD_MEM_DRAW) {  // A chunk located, not read.
    g_locate.addr = addr;
    g_locate.size = size;
    return 0;
  }
  auto* out = static_cast<uint8_t*>(buf);
  while (size > 0) {
    const ssize_t n = pread(f->fd, out, size, static_cast<off_t>(addr));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) {  // Past the end: zeros, as libhdf5's own drivers give.
      std::memset(out, 0, size);
      break;
    }
    out += n;
    addr += static_cast<haddr_t>(n);
    size -= static_cast<size_t>(n);
  }
  return 0;
}

herr_t FdWrite(H5FD_t*, H5FD_mem_t, hid_t, haddr_t, size_t, const void*) { return -1; }

herr_t FdLock(H5FD_t*, hbool_t) { return 0; }
herr_t FdUnlock(H5FD_t*) { return 0; }

H5FD_class_t FdClass() {
  H5FD_class_t c;
  std::memset(&c, 0, sizeof(c));
  c.name = "stoker-fd";
  c.maxaddr = static_cast<haddr_t>(INT64_MAX);
  c.fc_degree = H5F_CLOSE_WEAK;
  c.open = FdOpen;
  c.close = FdClose;
  c.get_eoa = FdGetEoa;
  c.set_eoa = FdSetEoa;
  c.get_eof = FdGetEof;
  c.read = FdRead;
  c.write = FdWrite;
  c.lock = FdLock;
  c.unlock = FdUnlock;
  for (int k = 0; k < H5FD_MEM_NTYPES; ++k) c.fl_map[k] = H5FD_MEM_SUPER;  // H5FD_FLMAP_SINGLE.
  c.fl_map[0] = H5FD_MEM_SUPER;
  return c;
}

hid_t g_fapl = -1, g_dapl = -1;

// Largest stored chunk located (the daemon refuses chunks over 64 MiB).
constexpr hsize_t kMaxLocatedBytes = hsize_t{80} << 20;

// External links are never followed (their file would be opened by name).
herr_t RefuseExternalLink(const char*, const char*, const char*, const char*, unsigned*, hid_t,
                          void*) {
  return -1;
}

// Closes an id with the matching function.
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

absl::Status Refused(const std::string& name, const char* why) {
  return absl::PermissionDeniedError(absl::StrCat(
      "dataset '", name, "' ", why, ": the daemon reads only the file it was given"));
}

absl::Status Failed(const std::string& what) { return absl::FailedPreconditionError(what); }

// PERMISSION_DENIED when a component of `name` is an external link.
absl::Status CheckLinks(hid_t file, const std::string& name) {
  std::string prefix;
  for (size_t at = 0; at <= name.size();) {
    size_t slash = name.find('/', at);
    if (slash == std::string::npos) slash = name.size();
    prefix.append(name, at, slash - at);
    at = slash + 1;
    if (!prefix.empty() && prefix != "/") {
      H5L_info_t info;
      if (H5Lget_info(file, prefix.c_str(), &info, g_dapl) < 0) break;
      if (info.type == H5L_TYPE_EXTERNAL) return Refused(name, "is an external link");
    }
    prefix.push_back('/');
  }
  return absl::OkStatus();
}

// Fills the element fields of `d` from `type`: plain only for whole-byte
// integers and IEEE half, single and double floats.
void DescribeType(hid_t type, Dataset* d) {
  const H5T_class_t cls = H5Tget_class(type);
  const size_t size = H5Tget_size(type);
  d->size = static_cast<uint8_t>(size <= 255 ? size : 0);
  d->big_endian = H5Tget_order(type) == H5T_ORDER_BE;
  const bool whole = H5Tget_offset(type) == 0 && H5Tget_precision(type) == size * 8;
  if (cls == H5T_INTEGER) {
    d->is_signed = H5Tget_sign(type) == H5T_SGN_2;
    d->plain = whole && (size == 1 || size == 2 || size == 4 || size == 8);
  } else if (cls == H5T_FLOAT) {
    d->is_float = true;
    size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
    H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize);
    const size_t bias = H5Tget_ebias(type);
    const bool implied = H5Tget_norm(type) == H5T_NORM_IMPLIED;
    auto ieee = [&](size_t s, size_t e, size_t es, size_t ms, size_t b) {
      return spos == s && epos == e && esize == es && mpos == 0 && msize == ms && bias == b;
    };
    d->plain = whole && implied &&
               ((size == 2 && ieee(15, 10, 5, 10, 15)) || (size == 4 && ieee(31, 23, 8, 23, 127)) ||
                (size == 8 && ieee(63, 52, 11, 52, 1023)));
  }
}

// The first few datasets the file holds ("'images', 'labels'", escaped
// and cut short), for a message naming what the caller could ask for.
std::string SomeDatasets(hid_t file) {
  struct Found {
    std::string names;
    int count = 0;
  } found;
  constexpr int kMost = 8;
  H5Ovisit2(
      file, H5_INDEX_NAME, H5_ITER_INC,
      +[](hid_t, const char* name, const H5O_info_t* info, void* data) -> herr_t {
        auto* f = static_cast<Found*>(data);
        if (info->type != H5O_TYPE_DATASET) return 0;
        if (f->count == kMost) {
          f->names += ", ...";
          return 1;  // Enough.
        }
        const std::string n = absl::CHexEscape(absl::string_view(name).substr(0, 64));
        absl::StrAppend(&f->names, f->count++ == 0 ? "" : ", ", "'", n, "'");
        return 0;
      },
      &found, H5O_INFO_BASIC);
  return found.count == 0 ? "none" : found.names;
}

absl::StatusOr<Dataset> DescribeSet(hid_t file, const std::string& name) {
  if (absl::Status links = CheckLinks(file, name); !links.ok()) return links;
  Id set(H5Dopen2(file, name.c_str(), g_dapl), H5Dclose);
  if (!set.ok()) {
    return Failed(absl::StrCat("has no dataset '", name, "' (its datasets: ", SomeDatasets(file),
                               ")"));
  }
  Id create(H5Dget_create_plist(set.get()), H5Pclose);
  Id space(H5Dget_space(set.get()), H5Sclose);
  Id type(H5Dget_type(set.get()), H5Tclose);
  if (!create.ok() || !space.ok() || !type.ok())
    return Failed(absl::StrCat("dataset '", name, "' is unreadable"));
  if (H5Pget_external_count(create.get()) != 0)
    return Refused(name, "keeps its data in external files");
  const H5D_layout_t layout = H5Pget_layout(create.get());
  if (layout == H5D_VIRTUAL)
    return Refused(name, "is a virtual dataset (its data is in other files)");
  Dataset d;
  const int nd = H5Sget_simple_extent_ndims(space.get());
  if (nd < 0 || nd > static_cast<int>(kMaxRank))
    return Failed(absl::StrCat("dataset '", name, "' has an unknown rank"));
  std::vector<hsize_t> dims(nd);
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  d.dims.assign(dims.begin(), dims.end());
  DescribeType(type.get(), &d);
  if (!d.plain) return d;  // The daemon says why.
  H5D_fill_value_t defined = H5D_FILL_VALUE_UNDEFINED;
  if (H5Pfill_value_defined(create.get(), &defined) >= 0 &&
      defined == H5D_FILL_VALUE_USER_DEFINED) {
    std::string fill(d.size, '\0');
    if (H5Pget_fill_value(create.get(), type.get(), fill.data()) >= 0) d.fill = fill;
  }
  if (layout == H5D_CONTIGUOUS) {
    d.layout = Layout::kContiguous;
    const haddr_t at = H5Dget_offset(set.get());
    d.allocated = at != HADDR_UNDEF;
    d.offset = d.allocated ? at : 0;
    d.stored = H5Dget_storage_size(set.get());
    return d;
  }
  if (layout == H5D_COMPACT) {
    d.layout = Layout::kCompact;
    const hsize_t bytes = H5Dget_storage_size(set.get());
    if (bytes > 64 * 1024) return Failed(absl::StrCat("dataset '", name, "' is unreadable"));
    d.compact.assign(bytes, '\0');
    // Read in its own type: the bytes as stored, no conversion.
    if (bytes > 0 &&
        H5Dread(set.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, d.compact.data()) < 0)
      return Failed(absl::StrCat("dataset '", name, "' is unreadable"));
    return d;
  }
  if (layout != H5D_CHUNKED) return Failed(absl::StrCat("dataset '", name, "' has an unknown layout"));
  d.layout = Layout::kChunked;
  hsize_t chunk[kMaxRank];
  const int rank = H5Pget_chunk(create.get(), static_cast<int>(kMaxRank), chunk);
  if (rank != nd || nd == 0)
    return Failed(absl::StrCat("dataset '", name, "' has chunks of an unknown rank"));
  d.chunk.assign(chunk, chunk + rank);
  for (int k = 0, n = H5Pget_nfilters(create.get()); k < n && k < 32; ++k) {
    unsigned flags = 0, config = 0;
    size_t values = 0;
    const H5Z_filter_t id =
        H5Pget_filter2(create.get(), k, &flags, &values, nullptr, 0, nullptr, &config);
    d.filters.push_back(Filter{static_cast<uint32_t>(id), flags});
  }
  uint64_t grid = 1;
  std::vector<hsize_t> cells(nd);
  for (int k = 0; k < nd; ++k) {
    if (chunk[k] == 0) return Failed(absl::StrCat("dataset '", name, "' has a chunk dimension of 0"));
    cells[k] = (dims[k] + chunk[k] - 1) / chunk[k];
    if (cells[k] != 0 && grid > kMaxChunks / cells[k])
      return absl::ResourceExhaustedError(
          absl::StrCat("dataset '", name, "' has more than ", kMaxChunks, " chunks"));
    grid *= cells[k];
  }
  d.chunks.resize(grid);
  std::vector<hsize_t> pos(nd, 0), offset(nd);
  std::vector<uint8_t> sink;  // Never written: the driver only notes where.
  for (uint64_t c = 0; c < grid; ++c) {
    for (int k = 0; k < nd; ++k) offset[k] = pos[k] * chunk[k];
    hsize_t stored = 0;
    if (H5Dget_chunk_storage_size(set.get(), offset.data(), &stored) < 0) {
      // libhdf5 1.10 fails this for a chunk never written, and for an index
      // it cannot read: the slow lookup tells them apart (never-written
      // chunks are rare in files written whole).
      unsigned mask = 0;
      haddr_t addr = HADDR_UNDEF;
      if (H5Dget_chunk_info_by_coord(set.get(), offset.data(), &mask, &addr, &stored) < 0 ||
          addr != HADDR_UNDEF)
        return Failed(absl::StrCat("dataset '", name, "' has a chunk index that cannot be read"));
      stored = 0;
    }
    if (stored > 0) {
      if (stored > kMaxLocatedBytes)
        return Failed(absl::StrCat("dataset '", name, "' has a chunk of ", stored, " bytes"));
      if (sink.size() < stored) sink.resize(stored);
      uint32_t mask = 0;
      g_locate = Locate{true, HADDR_UNDEF, 0};
      const herr_t read = H5Dread_chunk(set.get(), H5P_DEFAULT, offset.data(), &mask, sink.data());
      const Locate at = g_locate;
      g_locate.on = false;
      if (read < 0 || at.addr == HADDR_UNDEF || at.size != stored)
        return Failed(absl::StrCat("dataset '", name, "' has a chunk index that cannot be read"));
      d.chunks[c] = Chunk{at.addr, stored, mask};
    }
    for (int k = nd; k-- > 0;) {
      if (++pos[k] < cells[k]) break;
      pos[k] = 0;
    }
  }
  return d;
}

}  // namespace

absl::Status InitLibrary() {
  if (H5open() < 0) return absl::InternalError("libhdf5 did not start");
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  H5PLset_loading_state(0);  // Plugins are shared objects loaded by name.
  static const H5FD_class_t cls = FdClass();
  const hid_t driver = H5FDregister(&cls);
  g_fapl = H5Pcreate(H5P_FILE_ACCESS);
  g_dapl = H5Pcreate(H5P_DATASET_ACCESS);
  if (driver < 0 || g_fapl < 0 || g_dapl < 0 || H5Pset_driver(g_fapl, driver, nullptr) < 0 ||
      H5Pset_elink_cb(g_dapl, RefuseExternalLink, nullptr) < 0)
    return absl::InternalError("libhdf5's descriptor driver could not be set up");
  return absl::OkStatus();
}

Answer Describe(int fd, const Request& r) {
  Answer a;
  g_size = r.file_size;
  const hid_t file = H5Fopen(absl::StrCat("/", fd).c_str(), H5F_ACC_RDONLY, g_fapl);
  for (const std::string& name : r.names) {
    a.datasets.push_back(file < 0 ? absl::StatusOr<Dataset>(Failed("not an HDF5 file (or unreadable)"))
                                  : DescribeSet(file, name));
  }
  if (file >= 0) H5Fclose(file);
  H5Eclear2(H5E_DEFAULT);
  return a;
}

}  // namespace h5probe
}  // namespace stoker
