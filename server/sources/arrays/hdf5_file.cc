#include "server/sources/arrays/hdf5_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libdeflate.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "util/cache_key.h"
#include "util/checked_math.h"
#include "util/checksum.h"
#include "util/status_macros.h"

namespace stoker {
namespace h5 {

absl::Status Failed(const std::string& file, const std::string& what) {
  return absl::FailedPreconditionError(absl::StrCat(file, ": ", what));
}

Descriptor::~Descriptor() {
  if (fd_ >= 0) close(fd_);
}

namespace {

constexpr uint32_t kDeflate = 1, kShuffle = 2, kFletcher32 = 3;

// Most bytes a stored chunk may claim: its inflated size, plus deflate's
// worst-case growth (a stored block header per 16 KiB, the zlib frame) and
// a checksum.
uint64_t MostStored(uint64_t chunk_bytes) { return chunk_bytes + chunk_bytes / 1024 + 4096; }

// Largest chunk read (HDF5 allows 4 GiB; writers use about 1 MiB): each
// read of one allocates it, whatever the file's size.
constexpr uint64_t kMostChunkBytes = 64ULL << 20;

// Most bytes of a compact dataset (HDF5's own limit).
constexpr uint64_t kMostCompactBytes = 64 * 1024;

// A contiguous dataset's pieces hold this many bytes of whole rows at least.
constexpr uint64_t kRowPieceBytes = 64 * 1024;

const char* FilterName(uint32_t id) {
  switch (id) {
    case 4: return "szip";
    case 5: return "n-bit";
    case 6: return "scale-offset";
    case 32000: return "lzf";
    case 32001: return "blosc";
    case 32004: return "lz4";
    case 32008: return "bitshuffle";
    case 32015: return "zstd";
  }
  return "a third-party filter";
}

absl::StatusOr<ElemType> TypeOf(const h5probe::Dataset& d) {
  if (d.plain && d.is_float) {
    if (d.size == 2) return ElemType::kFloat16;
    if (d.size == 4) return ElemType::kFloat32;
    if (d.size == 8) return ElemType::kFloat64;
  } else if (d.plain) {
    switch (d.size) {
      case 1: return d.is_signed ? ElemType::kInt8 : ElemType::kUint8;
      case 2: return d.is_signed ? ElemType::kInt16 : ElemType::kUint16;
      case 4: return d.is_signed ? ElemType::kInt32 : ElemType::kUint32;
      case 8: return d.is_signed ? ElemType::kInt64 : ElemType::kUint64;
    }
  }
  return absl::InvalidArgumentError("not plain numbers");
}

// Reverses the bytes of each T in p (n bytes).
template <typename T, T (*Reverse)(T)>
void SwapAll(uint8_t* p, uint64_t n) {
  for (uint64_t i = 0; i + sizeof(T) <= n; i += sizeof(T)) {
    T v;
    std::memcpy(&v, p + i, sizeof(T));
    v = Reverse(v);
    std::memcpy(p + i, &v, sizeof(T));
  }
}

uint16_t Reverse16(uint16_t v) { return __builtin_bswap16(v); }
uint32_t Reverse32(uint32_t v) { return __builtin_bswap32(v); }
uint64_t Reverse64(uint64_t v) { return __builtin_bswap64(v); }

// Reverses the bytes of each `elem`-byte element of `p` (n bytes).
void Swap(uint8_t* p, uint64_t n, int elem) {
  if (elem == 2) SwapAll<uint16_t, Reverse16>(p, n);
  if (elem == 4) SwapAll<uint32_t, Reverse32>(p, n);
  if (elem == 8) SwapAll<uint64_t, Reverse64>(p, n);
}

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

// An uninitialised buffer of `n` bytes, freed when the chunk is done.
std::unique_ptr<uint8_t[]> Scratch(uint64_t n) { return std::unique_ptr<uint8_t[]>(new uint8_t[n]); }

}  // namespace

uint32_t Fletcher32(const uint8_t* data, size_t n) {
  uint32_t sum1 = 0, sum2 = 0;
  size_t words = n / 2;
  while (words > 0) {
    size_t run = std::min<size_t>(words, 360);
    words -= run;
    do {
      sum1 += (static_cast<uint32_t>(data[0]) << 8) | data[1];
      data += 2;
      sum2 += sum1;
    } while (--run);
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  }
  if (n % 2) {
    sum1 += static_cast<uint32_t>(*data) << 8;
    sum2 += sum1;
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  }
  sum1 = (sum1 & 0xffff) + (sum1 >> 16);
  sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  return (sum2 << 16) | sum1;
}

absl::StatusOr<Set> CheckSet(const File& f, const std::string& name, const h5probe::Dataset& d) {
  const std::string what = absl::StrCat(f.path, ": dataset '", name, "'");
  auto lost = [&](const std::string& why) { return absl::DataLossError(absl::StrCat(what, " ", why)); };
  absl::StatusOr<ElemType> type = TypeOf(d);
  if (!type.ok())
    return Failed(f.path, absl::StrCat("dataset '", name,
                                       "': its elements are not plain numbers (integers or "
                                       "IEEE floats)"));
  if (d.dims.size() > kMaxArrayDims) return Failed(f.path, "dataset of an unknown rank");
  Set s;
  s.path = f.path;
  s.fd = f.fd;
  s.file_size = f.size;
  s.dims = d.dims;
  s.elem = *type;
  const int elem = ElemBytes(s.elem);
  s.swap = d.big_endian && elem > 1;
  STOKER_ASSIGN_OR_RETURN(const uint64_t bytes, CheckedProduct(d.dims, elem, UINT64_MAX, what));
  if (!d.fill.empty() && d.fill.size() != static_cast<size_t>(elem)) return lost("has a fill value of another size");
  if (d.layout == h5probe::Layout::kCompact) {
    if (d.compact.size() != bytes || bytes > kMostCompactBytes)
      return lost("holds compact bytes of another size");
    s.compact = d.compact;
    if (s.swap) Swap(reinterpret_cast<uint8_t*>(s.compact.data()), bytes, elem);
    s.described = CacheKey({"compact", absl::StrJoin(d.dims, ","), s.compact});
    return s;
  }
  if (d.dims.empty()) return Failed(f.path, absl::StrCat("dataset '", name, "' is a scalar"));
  auto c = std::make_shared<Chunks>();
  c->fd_ = f.fd;
  c->dims_ = d.dims;
  c->what_ = f.path;
  c->type_ = s.elem;
  c->elem_ = elem;
  c->swap_ = s.swap;
  if (!d.fill.empty()) {
    c->fill_.assign(d.fill.begin(), d.fill.end());
    if (s.swap) Swap(c->fill_.data(), elem, elem);
  } else {
    c->fill_.assign(elem, 0);
  }
  const size_t nd = d.dims.size();
  if (d.layout == h5probe::Layout::kContiguous) {
    if (!d.allocated && bytes > 0) return Failed(f.path, absl::StrCat("dataset '", name, "' holds no data"));
    if (bytes > 0 && !RangeWithin(d.offset, bytes, f.size)) return lost("lies past the end of the file");
    s.raw = !s.swap;
    s.offset = d.offset;
    c->contiguous_ = true;
    c->offset_ = d.offset;
    // Pieces of whole rows of the first dimension.
    const uint64_t row = d.dims[0] == 0 ? 0 : bytes / d.dims[0];
    c->chunk_ = d.dims;
    c->chunk_[0] = std::max<uint64_t>(1, std::min<uint64_t>(std::max<uint64_t>(d.dims[0], 1),
                                                            row == 0 ? 1 : kRowPieceBytes / row));
  } else {
    s.chunked = true;
    if (d.chunk.size() != nd) return lost("has chunks of another rank");
    c->chunk_ = d.chunk;
    for (const h5probe::Filter& fl : d.filters) {
      if (fl.id != kDeflate && fl.id != kShuffle && fl.id != kFletcher32) {
        return Failed(f.path,
                      absl::StrCat("dataset '", name, "' is stored with filter ", fl.id, " (",
                                   FilterName(fl.id),
                                   "), which is not read; rewrite it with gzip "
                                   "(h5repack -f GZIP=4, or h5py's compression=\"gzip\")"));
      }
      c->filters_.push_back(fl.id);
    }
  }
  STOKER_ASSIGN_OR_RETURN(c->chunk_bytes_, CheckedProduct(c->chunk_, elem, uint64_t{1} << 32, what));
  c->grid_.resize(nd);
  for (size_t k = 0; k < nd; ++k) {
    if (c->chunk_[k] == 0) return lost("has a chunk dimension of 0");
    c->grid_[k] = d.dims[k] / c->chunk_[k] + (d.dims[k] % c->chunk_[k] != 0);
  }
  STOKER_ASSIGN_OR_RETURN(c->count_, CheckedProduct(c->grid_, 1, UINT64_MAX, what));
  if (s.chunked && c->chunk_bytes_ > kMostChunkBytes)
    return lost(absl::StrCat("has chunks of ", c->chunk_bytes_, " bytes for a volume of ", bytes,
                             " (", kMostChunkBytes, " at most)"));
  STOKER_ASSIGN_OR_RETURN(c->slots_bytes_,
                          CheckedProduct({c->count_}, c->chunk_bytes_, UINT64_MAX, what));
  if (s.chunked) {
    if (d.chunks.size() != c->count_) return lost("has a chunk index of another size");
    for (size_t k = 0; k < d.chunks.size(); ++k) {
      const h5probe::Chunk& e = d.chunks[k];
      if (e.size == 0) continue;
      if (!RangeWithin(e.offset, e.size, f.size) || e.size > MostStored(c->chunk_bytes_))
        return lost(absl::StrCat("has chunk ", k, " at ", e.offset, " (", e.size,
                                 " bytes) outside the file or larger than it could be"));
    }
    c->table_ = d.chunks;
  }
  // What was read of the file, as checked: cached decodes are keyed by it
  // too, so no other reader's description of the same file is served.
  Checksum table;
  for (const h5probe::Chunk& e : c->table_) {
    const uint64_t fields[3] = {e.offset, e.size, e.mask};
    table.Update(fields, sizeof(fields));
  }
  s.described = CacheKey({d.big_endian ? "be" : "le", uint64_t{d.size}, d.offset, d.fill,
                           table.state(), absl::StrJoin(d.dims, ","),
                           absl::StrJoin(c->chunk_, ","), absl::StrJoin(c->filters_, ",")});
  s.chunks = std::move(c);
  return s;
}

absl::StatusOr<File> OpenFile(const std::string& path, const Beneath* beneath, Prober& prober,
                              const std::vector<std::string>& names) {
  absl::StatusOr<std::shared_ptr<void>> held = ChargeHeld(beneath, path);
  if (!held.ok()) return held.status();
  absl::StatusOr<int> fd = OpenConfined(path, O_RDONLY, beneath);
  if (!fd.ok()) return fd.status();
  File f;
  f.path = path;
  f.fd = std::make_shared<Descriptor>(*fd);
  f.held = *std::move(held);
  struct stat st;
  if (fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode)) return Failed(path, "not a regular file");
  const FileVersion v = VersionOf(st);
  f.version = CacheKey({path, v.device, v.inode, v.size, v.mtime_ns, v.ctime_ns});
  f.size = static_cast<uint64_t>(st.st_size);
  STOKER_ASSIGN_OR_RETURN(h5probe::Answer answer, prober.Describe(*fd, f.size, names, path));
  for (size_t k = 0; k < names.size(); ++k) {
    const absl::StatusOr<h5probe::Dataset>& d = answer.datasets[k];
    if (!d.ok()) {
      f.sets.push_back(absl::Status(d.status().code(), absl::StrCat(path, ": ", d.status().message())));
    } else {
      f.sets.push_back(CheckSet(f, names[k], *d));
    }
  }
  return f;
}

std::vector<uint64_t> Chunks::Touching(const uint64_t* start, const uint64_t* count) const {
  const size_t nd = grid_.size();
  if (count_ == 0) return {};
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
  auto fail = [&](const std::string& why) {
    return absl::DataLossError(
        absl::StrCat(what_, ": chunk at [", absl::StrJoin(at, ", "), "] ", why));
  };
  if (c >= count_) return absl::DataLossError(absl::StrCat(what_, ": no chunk ", c));
  if (contiguous_) {  // A contiguous dataset's rows.
    const uint64_t row = chunk_bytes_ / chunk_[0];
    const uint64_t rows = std::min(chunk_[0], dims_[0] - at[0]);
    if (!ReadAt(fd_->get(), offset_ + at[0] * row, rows * row, slot)) return fail("is cut short");
    std::memset(slot + rows * row, 0, chunk_bytes_ - rows * row);
    if (swap_) Swap(slot, rows * row, elem_);
    return absl::OkStatus();
  }
  thread_local Inflater z;
  const h5probe::Chunk& e = table_[c];
  if (e.size == 0) {  // Never written.
    for (uint64_t i = 0; i < chunk_bytes_; i += elem_) std::memcpy(&slot[i], fill_.data(), elem_);
    return absl::OkStatus();
  }
  std::unique_ptr<uint8_t[]> bufs[3] = {Scratch(e.size), nullptr, nullptr};
  if (!ReadAt(fd_->get(), e.offset, e.size, bufs[0].get())) return fail("is cut short");
  // The filters to undo, last to first; the last undone writes the slot.
  std::vector<size_t> undo;
  for (size_t k = filters_.size(); k-- > 0;) {
    if (!(e.mask & (1u << k))) undo.push_back(k);
  }
  const uint8_t* cur = bufs[0].get();
  size_t size = e.size;
  bool in_slot = false;
  int stage = 0;  // Stages that wrote a buffer: they alternate between two.
  for (size_t j = 0; j < undo.size(); ++j) {
    const uint32_t id = filters_[undo[j]];
    if (id == kFletcher32) {  // Checked and dropped where it lies.
      if (size < 4) return fail("is too short for its checksum");
      uint32_t stored;
      std::memcpy(&stored, cur + size - 4, 4);
      size -= 4;
      const uint32_t sum = Fletcher32(cur, size);
      // Files before HDF5 1.6.3 stored it with each 16-bit half swapped.
      const uint32_t old = ((sum & 0x00ff00ffu) << 8) | ((sum >> 8) & 0x00ff00ffu);
      if (stored != sum && stored != old) return fail("fails its fletcher32 checksum");
      continue;
    }
    uint8_t* out = slot;
    bool more = false;
    for (size_t r = j + 1; r < undo.size(); ++r) more = more || filters_[undo[r]] != kFletcher32;
    if (more) {  // Into the other stage buffer.
      std::unique_ptr<uint8_t[]>& mid = bufs[1 + stage++ % 2];
      if (mid == nullptr) mid = Scratch(chunk_bytes_);
      out = mid.get();
    }
    if (id == kDeflate) {
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
    in_slot = out == slot;
  }
  if (size != chunk_bytes_) return fail(absl::StrCat("holds ", size, " bytes, not ", chunk_bytes_));
  if (!in_slot) std::memcpy(slot, cur, size);
  if (swap_) Swap(slot, chunk_bytes_, elem_);
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

void Chunks::CopyPiece(uint64_t c, const uint8_t* piece, const uint64_t* start,
                       const uint64_t* count, ElemType to, uint8_t* dst) const {
  const size_t nd = dims_.size();
  std::vector<uint64_t> inner(nd), part(nd), place(nd);
  const std::vector<uint64_t> at = Origin(c);
  for (size_t k = 0; k < nd; ++k) {
    const uint64_t lo = std::max(start[k], at[k]);
    const uint64_t hi = std::min(start[k] + count[k], at[k] + chunk_[k]);
    inner[k] = lo - at[k];
    part[k] = hi - lo;
    place[k] = lo - start[k];
  }
  CopyBox(piece, type_, chunk_.data(), inner.data(), part.data(), nd, dst, to, count,
          place.data());
}

void Chunks::CopyOut(const uint8_t* slots, const uint64_t* start, const uint64_t* count,
                     ElemType to, uint8_t* dst) const {
  for (uint64_t c : Touching(start, count)) {
    CopyPiece(c, slots + c * chunk_bytes_, start, count, to, dst);
  }
}

absl::Status ReadSlab(const Set& d, const std::vector<uint64_t>& start,
                      const std::vector<uint64_t>& count, ElemType to, uint8_t* dst,
                      const std::string& what) {
  if (start.size() != d.dims.size() || count.size() != d.dims.size())
    return absl::DataLossError(absl::StrCat(what, ": bad region"));
  for (size_t k = 0; k < d.dims.size(); ++k) {
    if (start[k] > d.dims[k] || count[k] > d.dims[k] - start[k])
      return absl::DataLossError(absl::StrCat(what, ": bad region"));
  }
  if (d.chunks == nullptr) {  // Compact.
    CopyRegion(reinterpret_cast<const uint8_t*>(d.compact.data()), d.elem, d.dims, start.data(),
               count.data(), dst, to);
    return absl::OkStatus();
  }
  const Chunks& c = *d.chunks;
  std::unique_ptr<uint8_t[]> piece = Scratch(c.chunk_bytes());
  for (uint64_t k : c.Touching(start.data(), count.data())) {
    STOKER_RETURN_IF_ERROR(c.Inflate(k, piece.get()));
    c.CopyPiece(k, piece.get(), start.data(), count.data(), to, dst);
  }
  return absl::OkStatus();
}

absl::Status ReadWhole(const Set& d, const VolumeCache::Parallel& parallel, uint8_t* dst) {
  if (d.chunks == nullptr) {
    std::memcpy(dst, d.compact.data(), d.compact.size());
    return absl::OkStatus();
  }
  const Chunks& chunks = *d.chunks;
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
