// Confined HDF5 file access for the hdf5 source kind, through Debian's
// libhdf5 (serial, thread-safe build: the library serializes its calls).
//
// A file is opened from the descriptor openat2 gave (/proc/self/fd/N), so
// HDF5 never resolves a path itself; a dataset whose data would come from
// another file (external storage, an external link, a virtual dataset) is
// PERMISSION_DENIED, external links are never traversed, and filter
// plugins are never loaded.
//
// ReadWhole reads a dataset whole: a chunked one whose only filters are
// shuffle and deflate chunk by chunk, each chunk's stored bytes taken
// from the library (H5Dread_chunk, under its lock) and unshuffled and
// inflated here (libdeflate), chunks spread over a Parallel: the library's
// lock is held only for the raw reads. Chunk sizes and inflated lengths
// are checked against the dataset's own geometry: a hostile or corrupt
// chunk is DATA_LOSS naming the file and the chunk, never a write past the
// volume.
//
// Thread-safe as the library is; the objects are used by one reader at a
// time or read-only.
#ifndef STOKER_SERVER_SOURCES_HDF5_FILE_H_
#define STOKER_SERVER_SOURCES_HDF5_FILE_H_

#include <hdf5/serial/hdf5.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/array_source.h"
#include "server/file_system.h"
#include "server/volume_cache.h"

namespace stoker {
namespace h5 {

// Closes an HDF5 id with the matching function.
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

// FAILED_PRECONDITION "file: what".
absl::Status Failed(const std::string& file, const std::string& what);

// An open file, confined when `beneath` is set.
struct File {
  std::string path;
  // The file version HDF5 opened (path, device, inode, size, mtime): keys
  // what is kept of it.
  std::string version;
  std::unique_ptr<Id> id;
  std::shared_ptr<void> held;  // Its token (ChargeHeld): HDF5 keeps it open.
};

// Opens `path` read-only beneath `beneath` (when set).
absl::StatusOr<File> OpenFile(const std::string& path, const Beneath* beneath);

struct Set {
  std::unique_ptr<Id> set, space, type;
  std::vector<uint64_t> dims;
  ElemType elem = ElemType::kUint8;
  // Contiguous, unfiltered, little-endian: its elements at this offset of
  // the file, readable without the library.
  bool raw = false;
  uint64_t offset = 0;
  // Chunked, with no filters but shuffle and deflate, little-endian: its
  // chunks can be read raw and inflated outside the library (ReadWhole).
  bool inflatable = false;
  std::vector<uint64_t> chunk;         // Chunk dimensions when chunked.
  std::vector<H5Z_filter_t> filters;   // In pipeline order (write order).
};

// Opens dataset `name` of `f`: PERMISSION_DENIED for data in other files,
// FAILED_PRECONDITION for no such dataset or elements that are not plain
// numbers.
absl::StatusOr<Set> OpenSet(const File& f, const std::string& name);

// Reads the hyperslab [start, start + count) of `d` into dst as `to`
// (DATA_LOSS naming `what` when the library fails).
absl::Status ReadSlab(const Set& d, const std::vector<hsize_t>& start,
                      const std::vector<hsize_t>& count, ElemType to, uint8_t* dst,
                      const std::string& what);

// The chunks of an inflatable dataset (Set::inflatable), each read raw by
// the library (under its lock) and unshuffled and inflated here: a volume
// may be filled chunk by chunk, as its reads need them. Uses the Set's
// dataset, which must stay open while it is used. Thread-safe.
class Chunks {
 public:
  // DATA_LOSS for a chunk geometry the dataset cannot hold;
  // FAILED_PRECONDITION when `d` is not inflatable.
  static absl::StatusOr<Chunks> Of(const Set& d, const std::string& what);
  uint64_t count() const { return count_; }
  // The chunks (row-major over the chunk grid) holding any element of the
  // region [start, start + count) of the dataset.
  std::vector<uint64_t> Touching(const uint64_t* start, const uint64_t* count) const;
  // Chunk c into its place in `dst`, the whole dataset's elements as stored
  // (clipped at the dataset's edges). DATA_LOSS naming the chunk for one
  // that is corrupt or hostile; never a write outside its place.
  absl::Status Read(uint64_t c, uint8_t* dst) const;

  // The volume in chunk order, as the file stores it: chunk c's elements
  // (row-major within the chunk, its part past the dataset's edge
  // included) fill the slot of chunk_bytes() at c * chunk_bytes() of
  // slots_bytes(). Filling a chunk then writes one contiguous slot, the
  // pages its patches touch and no others, with no copy after the inflate.
  uint64_t chunk_bytes() const { return chunk_bytes_; }
  uint64_t slots_bytes() const { return slots_bytes_; }
  // Chunk c into its slot (chunk_bytes() at `slot`); errors as Read's.
  absl::Status Inflate(uint64_t c, uint8_t* slot) const;
  // The region [start, start + count) of the dataset (inside it) from
  // `slots` whose Touching(start, count) slots are filled, into dst
  // (contiguous, as `to`, converted as CopyRegion does).
  void CopyOut(const uint8_t* slots, const uint64_t* start, const uint64_t* count, ElemType to,
               uint8_t* dst) const;

 private:
  // The first element of chunk c.
  std::vector<uint64_t> Origin(uint64_t c) const;

  hid_t set_ = -1;
  std::vector<uint64_t> dims_, chunk_;
  std::vector<H5Z_filter_t> filters_;
  std::string what_;
  ElemType type_ = ElemType::kUint8;
  int elem_ = 1;
  uint64_t chunk_bytes_ = 0, count_ = 0, slots_bytes_ = 0;
  std::vector<uint64_t> grid_;
  std::vector<uint8_t> fill_;
};

// Reads all of `d` into `dst` (its elements as stored, d.elem, little-
// endian: ElemBytes(d.elem) x the product of d.dims bytes): inflatable
// datasets chunk by chunk over `parallel`, others in one library read.
absl::Status ReadWhole(const Set& d, const VolumeCache::Parallel& parallel, uint8_t* dst,
                       const std::string& what);

}  // namespace h5
}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_HDF5_FILE_H_
