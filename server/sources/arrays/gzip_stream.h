// A gzip file inflated piece by piece from an open descriptor: what is held
// is a fixed input buffer (kInputBytes) and the inflater's state, never the
// compressed file or its inflated bytes whole, so a volume of any size is
// inflated into its place with a few hundred KiB besides. Members follow
// one another (as bgzip and pigz -i write); each one's CRC-32 and length
// are checked against its trailer. ISA-L's inflater (igzip): as fast as
// inflating a whole buffer with libdeflate.
//
// Every byte is the trainer's: a stream that is not gzip, is corrupt, or
// ends inside a member is DATA_LOSS naming `what` and the input byte; the
// file is read no further than `size` (its size when it was opened), so a
// file that grows is not followed, and one that shrinks is DATA_LOSS.
//
// Not thread-safe: one reader per thread at a time.
#ifndef STOKER_SERVER_SOURCES_ARRAYS_GZIP_STREAM_H_
#define STOKER_SERVER_SOURCES_ARRAYS_GZIP_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace stoker {

class GzipStream {
 public:
  static constexpr size_t kInputBytes = 256 << 10;

  // Inflates bytes [0, size) of `fd` (not owned; open while the stream
  // is used). `what` names the file in errors.
  GzipStream(int fd, uint64_t size, std::string what);
  ~GzipStream();
  GzipStream(const GzipStream&) = delete;
  GzipStream& operator=(const GzipStream&) = delete;

  // Fills out[0, n) with the next inflated bytes, member after member:
  // how many it got, fewer than n only when the stream ended.
  absl::StatusOr<size_t> Read(uint8_t* out, size_t n);
  // Skips the next n inflated bytes (through a small buffer): how many.
  absl::StatusOr<uint64_t> Skip(uint64_t n);
  // Whether the member being inflated ends here (its trailer checked):
  // false when it holds more bytes. Members after it are not looked at,
  // so what follows a stream of the expected length is ignored.
  absl::StatusOr<bool> MemberEndsHere();

 private:
  struct State;
  // Inflates into out[0, n) within the current member: how many; sets
  // member_done_ at its end.
  absl::StatusOr<size_t> Inflate(uint8_t* out, size_t n);
  absl::Status Refill();
  absl::Status Corrupt() const;

  const int fd_;
  const uint64_t size_;
  const std::string what_;
  std::unique_ptr<State> state_;
  std::unique_ptr<uint8_t[]> input_;
  uint64_t read_ = 0;  // File bytes read into input_ so far.
  bool member_done_ = false;
};

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_ARRAYS_GZIP_STREAM_H_
