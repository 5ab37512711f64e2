#include "server/sources/arrays/gzip_stream.h"

#include <isa-l/igzip_lib.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "server/access/file_system.h"

namespace stoker {

struct GzipStream::State {
  inflate_state z;
};

GzipStream::GzipStream(int fd, uint64_t size, std::string what)
    : fd_(fd),
      size_(size),
      what_(std::move(what)),
      state_(std::make_unique<State>()),
      input_(new uint8_t[kInputBytes]) {
  isal_inflate_init(&state_->z);
  state_->z.crc_flag = ISAL_GZIP;
  state_->z.avail_in = 0;
}

GzipStream::~GzipStream() = default;

absl::Status GzipStream::Corrupt() const {
  return absl::DataLossError(absl::StrCat(what_, ": not a valid gzip stream at byte ",
                                          read_ - state_->z.avail_in));
}

absl::Status GzipStream::Refill() {
  inflate_state& z = state_->z;
  const size_t kept = z.avail_in;
  if (kept > 0) std::memmove(input_.get(), z.next_in, kept);
  const uint64_t n = std::min<uint64_t>(kInputBytes - kept, size_ - read_);
  int err = 0;
  if (!ReadAt(fd_, read_, n, input_.get() + kept, &err))
    return absl::DataLossError(absl::StrCat(what_, ": cannot read byte ", read_, " of ", size_,
                                            err != 0 ? absl::StrCat(": ", std::strerror(err))
                                                     : ": the file is shorter now"));
  read_ += n;
  z.next_in = input_.get();
  z.avail_in = static_cast<uint32_t>(kept + n);
  return absl::OkStatus();
}

absl::StatusOr<size_t> GzipStream::Inflate(uint8_t* out, size_t n) {
  inflate_state& z = state_->z;
  size_t got = 0;
  while (got < n && !member_done_) {
    if (z.avail_in == 0 && read_ < size_) {
      if (absl::Status s = Refill(); !s.ok()) return s;
    }
    // At the file's end the inflater may still hold bits of its own (the
    // block's end, the trailer): it is asked until it makes no progress.
    const size_t want = std::min<size_t>(n - got, UINT32_MAX);
    z.next_out = out + got;
    z.avail_out = static_cast<uint32_t>(want);
    const uint32_t in_before = z.avail_in;
    const int state_before = z.block_state;
    const int r = isal_inflate(&z);
    if (r < 0) return Corrupt();
    const size_t made = want - z.avail_out;
    got += made;
    if (z.block_state == ISAL_BLOCK_FINISH) {
      member_done_ = true;
    } else if (made == 0 && z.avail_in == in_before && z.block_state == state_before &&
               (z.avail_in == 0 || read_ == size_)) {
      if (z.avail_in == 0)
        return absl::DataLossError(absl::StrCat(what_, ": the gzip stream ends inside a member, "
                                                "at byte ", size_));
      return Corrupt();  // Bytes it cannot go on from.
    }
  }
  return got;
}

absl::StatusOr<size_t> GzipStream::Read(uint8_t* out, size_t n) {
  inflate_state& z = state_->z;
  size_t got = 0;
  while (got < n) {
    if (member_done_) {
      if (z.avail_in == 0 && read_ == size_) break;  // The stream's end.
      uint8_t* const next_in = z.next_in;            // The next member.
      const uint32_t avail_in = z.avail_in;
      isal_inflate_reset(&z);
      z.crc_flag = ISAL_GZIP;
      z.next_in = next_in;
      z.avail_in = avail_in;
      member_done_ = false;
    }
    absl::StatusOr<size_t> made = Inflate(out + got, n - got);
    if (!made.ok()) return made.status();
    got += *made;
  }
  return got;
}

absl::StatusOr<uint64_t> GzipStream::Skip(uint64_t n) {
  uint8_t scratch[16 << 10];
  uint64_t skipped = 0;
  while (skipped < n) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(sizeof(scratch), n - skipped));
    absl::StatusOr<size_t> got = Read(scratch, want);
    if (!got.ok()) return got.status();
    skipped += *got;
    if (*got < want) break;
  }
  return skipped;
}

absl::StatusOr<bool> GzipStream::MemberEndsHere() {
  if (member_done_) return true;
  uint8_t one = 0;
  absl::StatusOr<size_t> got = Inflate(&one, 1);
  if (!got.ok()) return got.status();
  return *got == 0;
}

}  // namespace stoker
