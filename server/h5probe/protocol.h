// What the HDF5 reader (stoker-h5probe, probe.cc) and the daemon say to each
// other over the reader's socket: one request per file, one answer.
//
// The reader is a separate, sandboxed process: libhdf5 parses a trainer's
// file there, never in the shared daemon. A request carries the file's
// descriptor (SCM_RIGHTS, opened by the daemon with the caller's rights),
// its size and the dataset names wanted. The answer describes each dataset
// (shape, element type, and where its bytes are: a contiguous range,
// compact bytes, or each chunk's offset, size and filter mask) or says why
// it cannot; the daemon then reads and unfilters the bytes itself
// (server/sources/arrays/hdf5_file.h).
//
// The answer comes from a process that parsed hostile bytes: DecodeAnswer
// checks only that it is well formed (every count bounded by the bytes that
// carry it, DATA_LOSS otherwise); what the description claims is checked
// against the file and the geometry by the daemon before it reads a byte.
//
// Wire format (little-endian): a frame is u32 length + that many bytes.
// Request: u64 file size, u32 names, then per name u32 length + bytes.
// Answer: u32 datasets, then per dataset u8 status code; non-zero: u32
// length + message; zero: the Dataset fields in declaration order (vectors
// as u32 count + items; strings as u32 length + bytes).
#ifndef STOKER_SERVER_H5PROBE_PROTOCOL_H_
#define STOKER_SERVER_H5PROBE_PROTOCOL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace stoker {
namespace h5probe {

// Most bytes of a request, and of an answer (a chunk table of about 4 M
// chunks).
inline constexpr uint32_t kMaxRequestBytes = 64 * 1024;
inline constexpr uint32_t kMaxAnswerBytes = 128u << 20;
// Most chunks one dataset may have, written or not (the reader lists each
// grid position).
inline constexpr uint64_t kMaxChunks = 4u << 20;
// Most dimensions of a dataset, and names in a request.
inline constexpr uint32_t kMaxRank = 32;
inline constexpr uint32_t kMaxNames = 8;

struct Request {
  uint64_t file_size = 0;
  std::vector<std::string> names;  // Datasets wanted, in the answer's order.
};

enum class Layout : uint8_t { kContiguous = 0, kChunked = 1, kCompact = 2 };

struct Filter {
  uint32_t id = 0;     // H5Z_FILTER_* (1 deflate, 2 shuffle, 3 fletcher32, ...).
  uint32_t flags = 0;  // H5Z_FLAG_*.
};

struct Chunk {
  uint64_t offset = 0;  // In the file.
  uint64_t size = 0;    // Stored bytes; 0: never written (fill value).
  uint32_t mask = 0;    // Bit k set: filter k was skipped for this chunk.
};

struct Dataset {
  std::vector<uint64_t> dims;
  // The element: an integer (signed or not) or an IEEE float, of `size`
  // bytes, stored big-endian or little-endian. `plain` is false for any
  // other class or a non-standard layout of bits (the daemon refuses it).
  bool plain = false, is_float = false, is_signed = false, big_endian = false;
  uint8_t size = 0;
  Layout layout = Layout::kContiguous;
  // Contiguous: its bytes at `offset`, `stored` of them; `allocated` false
  // when nothing was ever written.
  bool allocated = false;
  uint64_t offset = 0, stored = 0;
  std::string compact;  // Compact: the bytes, as stored.
  // Chunked: chunk dimensions, the filter pipeline in the order the writer
  // applied it, and one entry per grid position (row-major over the grid).
  std::vector<uint64_t> chunk;
  std::vector<Filter> filters;
  std::vector<Chunk> chunks;
  std::string fill;  // One element, as stored; empty: zeros.
};

// One entry per name requested.
struct Answer {
  std::vector<absl::StatusOr<Dataset>> datasets;
};

// Frames on a stream socket: `bytes` with descriptor `fd` attached (fd < 0:
// none), and one frame of at most `max_bytes` with the descriptor it
// carries, if any (*fd = -1 otherwise; the caller owns it). Each waits
// `timeout_ms` at most (DEADLINE_EXCEEDED; forever when negative).
// UNAVAILABLE when the peer has gone.
absl::Status SendFrame(int sock, const std::string& bytes, int fd = -1, int timeout_ms = -1);
absl::Status ReceiveFrame(int sock, uint32_t max_bytes, int timeout_ms, std::string* bytes,
                          int* fd);

std::string EncodeRequest(const Request& r);
absl::StatusOr<Request> DecodeRequest(const std::string& bytes);
std::string EncodeAnswer(const Answer& a);
// DATA_LOSS for anything malformed or over the bounds above.
absl::StatusOr<Answer> DecodeAnswer(const std::string& bytes);

}  // namespace h5probe
}  // namespace stoker

#endif  // STOKER_SERVER_H5PROBE_PROTOCOL_H_
