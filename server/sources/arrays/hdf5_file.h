// Confined HDF5 file access for the hdf5 source kind, without libhdf5 in
// the daemon.
//
// A file is opened with the caller's rights (OpenConfined) and its
// descriptor handed to the HDF5 reader (hdf5_prober.h), a sandboxed process
// where libhdf5 parses it and says where each dataset's bytes are. Every
// claim of that answer is checked here against the file's size and the
// dataset's geometry before a byte is read: contiguous bytes inside the
// file, compact bytes of the dataset's size, one chunk record per grid
// position, each inside the file and no larger than its chunk could be
// stored. The daemon then reads the bytes itself, by pread on the same
// descriptor (or a mapping of it), and undoes the filters itself: shuffle,
// deflate (libdeflate) and fletcher32, and big-endian byte order. Anything
// else (szip, n-bit, scale-offset, third-party filters, non-IEEE floats,
// compound elements) is FAILED_PRECONDITION naming it. A hostile or
// corrupt chunk is DATA_LOSS naming the file and the chunk, never a write
// past the volume; no lock is taken to read one.
//
// Files and sets are immutable once opened: thread-safe.
#ifndef STOKER_SERVER_SOURCES_ARRAYS_HDF5_FILE_H_
#define STOKER_SERVER_SOURCES_ARRAYS_HDF5_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/dataset/array_source.h"
#include "server/access/file_system.h"
#include "server/h5probe/protocol.h"
#include "server/sources/arrays/hdf5_prober.h"
#include "server/cache/volume_cache.h"

namespace stoker {
namespace h5 {

// FAILED_PRECONDITION "file: what".
absl::Status Failed(const std::string& file, const std::string& what);

// A descriptor, closed with its last holder.
class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor();
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

class Chunks;

// A dataset of an open file, as read here.
struct Set {
  std::string path;  // The file's, for errors.
  std::shared_ptr<const Descriptor> fd;
  uint64_t file_size = 0;
  std::vector<uint64_t> dims;
  ElemType elem = ElemType::kUint8;
  bool swap = false;  // Stored big-endian.
  // Contiguous and little-endian: its elements at `offset` of the file,
  // readable from a mapping as they lie.
  bool raw = false;
  uint64_t offset = 0;
  std::string compact;  // Compact: its elements, little-endian.
  // Its bytes as pieces (chunks; for a contiguous dataset, rows of its
  // first dimension); null for a compact one.
  std::shared_ptr<const Chunks> chunks;
  // Chunked (not a contiguous dataset's rows).
  bool chunked = false;
  // The checked description (layout, type, chunk table, fill): part of the
  // key of anything kept of its decoded bytes.
  std::string described;
};

// An open file: its version, its descriptor, and the datasets asked for.
struct File {
  std::string path;
  // The file version opened (path, device, inode, size, mtime): keys what
  // is kept of it.
  std::string version;
  std::shared_ptr<const Descriptor> fd;
  uint64_t size = 0;
  std::shared_ptr<void> held;  // Its token (ChargeHeld).
  std::vector<absl::StatusOr<Set>> sets;  // One per name, in order.
};

// Opens `path` read-only beneath `beneath` (when set) and has `prober`
// describe datasets `names` (FAILED_PRECONDITION for one that is not there
// or not plain numbers, PERMISSION_DENIED for data in other files).
absl::StatusOr<File> OpenFile(const std::string& path, const Beneath* beneath, Prober& prober,
                              const std::vector<std::string>& names);

// Reads the region [start, start + count) of `d` into dst as `to`
// (DATA_LOSS naming `what` for a corrupt file).
absl::Status ReadSlab(const Set& d, const std::vector<uint64_t>& start,
                      const std::vector<uint64_t>& count, ElemType to, uint8_t* dst,
                      const std::string& what);

// Reads all of `d` into `dst` (its elements, d.elem, little-endian:
// ElemBytes(d.elem) x the product of d.dims bytes), its pieces spread over
// `parallel`. DATA_LOSS naming the file and piece for a corrupt one.
absl::Status ReadWhole(const Set& d, const VolumeCache::Parallel& parallel, uint8_t* dst);

// A dataset's pieces: chunks, each read by pread and unfiltered here, or a
// contiguous dataset's rows. A volume may be filled piece by piece, as its
// reads need them.
class Chunks {
 public:
  uint64_t count() const { return count_; }
  // Bytes its chunk index holds in memory.
  uint64_t index_bytes() const { return table_.size() * sizeof(h5probe::Chunk); }
  // The pieces (row-major over the grid) holding any element of the region
  // [start, start + count) of the dataset.
  std::vector<uint64_t> Touching(const uint64_t* start, const uint64_t* count) const;
  // Piece c into its place in `dst`, the whole dataset's elements
  // (clipped at the dataset's edges). DATA_LOSS naming the piece for one
  // that is corrupt or hostile; never a write outside its place.
  absl::Status Read(uint64_t c, uint8_t* dst) const;

  // The volume in piece order: piece c's elements (row-major within it,
  // its part past the dataset's edge included) fill the slot of
  // chunk_bytes() at c * chunk_bytes() of slots_bytes(). Filling a piece
  // then writes one contiguous slot, with no copy after the inflate.
  uint64_t chunk_bytes() const { return chunk_bytes_; }
  uint64_t slots_bytes() const { return slots_bytes_; }
  // Piece c into its slot (chunk_bytes() at `slot`), little-endian; errors
  // as Read's.
  absl::Status Inflate(uint64_t c, uint8_t* slot) const;
  // The region [start, start + count) of the dataset (inside it) from
  // `slots` whose Touching(start, count) slots are filled, into dst
  // (contiguous, as `to`, converted as CopyRegion does).
  void CopyOut(const uint8_t* slots, const uint64_t* start, const uint64_t* count, ElemType to,
               uint8_t* dst) const;
  // The part of that region inside piece c, from `piece` (its slot).
  void CopyPiece(uint64_t c, const uint8_t* piece, const uint64_t* start, const uint64_t* count,
                 ElemType to, uint8_t* dst) const;

 private:
  friend absl::StatusOr<Set> CheckSet(const File& f, const std::string& name,
                                      const h5probe::Dataset& d);
  // The first element of piece c.
  std::vector<uint64_t> Origin(uint64_t c) const;

  std::shared_ptr<const Descriptor> fd_;
  std::vector<uint64_t> dims_, chunk_;
  std::vector<uint32_t> filters_;
  std::vector<h5probe::Chunk> table_;  // Chunked: per piece.
  bool contiguous_ = false;            // Pieces are rows from offset_.
  uint64_t offset_ = 0;
  std::string what_;
  ElemType type_ = ElemType::kUint8;
  int elem_ = 1;
  bool swap_ = false;
  uint64_t chunk_bytes_ = 0, count_ = 0, slots_bytes_ = 0;
  std::vector<uint64_t> grid_;
  std::vector<uint8_t> fill_;
};

// Checks the reader's description `d` of dataset `name` against file `f`.
absl::StatusOr<Set> CheckSet(const File& f, const std::string& name, const h5probe::Dataset& d);

// HDF5's fletcher32 checksum of `n` bytes (H5_checksum_fletcher32).
uint32_t Fletcher32(const uint8_t* data, size_t n);

}  // namespace h5
}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_ARRAYS_HDF5_FILE_H_
