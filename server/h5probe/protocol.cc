#include "server/h5probe/protocol.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shm/fd_passing.h"

namespace stoker {
namespace h5probe {
namespace {

class Writer {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void Str(const std::string& s) {
    U32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  void U64s(const std::vector<uint64_t>& v) {
    U32(static_cast<uint32_t>(v.size()));
    for (uint64_t x : v) U64(x);
  }
  std::string Take() { return std::move(out_); }

 private:
  void Raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string out_;
};

// Reads fields from untrusted bytes: any read past the end, or a count
// whose items could not fit in what is left, fails the whole decode.
class Reader {
 public:
  explicit Reader(const std::string& in) : p_(in.data()), left_(in.size()) {}
  bool ok() const { return ok_; }
  bool done() const { return ok_ && left_ == 0; }
  uint8_t U8() {
    uint8_t v = 0;
    Raw(&v, 1);
    return v;
  }
  uint32_t U32() {
    uint32_t v = 0;
    Raw(&v, 4);
    return v;
  }
  uint64_t U64() {
    uint64_t v = 0;
    Raw(&v, 8);
    return v;
  }
  // A count of items of at least `item_bytes` each, at most `most`.
  uint32_t Count(size_t item_bytes, uint64_t most) {
    const uint32_t n = U32();
    if (n > most || n > left_ / item_bytes) ok_ = false;
    return ok_ ? n : 0;
  }
  std::string Str(uint64_t most) {
    const uint32_t n = Count(1, most);
    std::string s(p_, ok_ ? n : 0);
    Skip(s.size());
    return s;
  }
  std::vector<uint64_t> U64s(uint64_t most) {
    std::vector<uint64_t> v(Count(8, most));
    for (uint64_t& x : v) x = U64();
    return v;
  }

 private:
  void Raw(void* dst, size_t n) {
    if (!ok_ || left_ < n) {
      ok_ = false;
      return;
    }
    std::memcpy(dst, p_, n);
    Skip(n);
  }
  void Skip(size_t n) {
    p_ += n;
    left_ -= n;
  }
  const char* p_;
  size_t left_;
  bool ok_ = true;
};

absl::Status Malformed(const char* what) {
  return absl::DataLossError(absl::StrCat("the HDF5 reader's ", what, " is malformed"));
}

// Waits until `sock` is ready for `events` or the deadline passes (never
// with no deadline): false when it passed.
bool Ready(int sock, short events, int timeout_ms,
           std::chrono::steady_clock::time_point deadline) {
  if (timeout_ms < 0) return true;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    struct pollfd p {sock, events, 0};
    const int r = left.count() <= 0 ? 0 : poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    return r > 0;
  }
}

}  // namespace

absl::Status SendFrame(int sock, const std::string& bytes, int fd, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string frame;
  const uint32_t n = static_cast<uint32_t>(bytes.size());
  frame.append(reinterpret_cast<const char*>(&n), 4);
  frame.append(bytes);
  size_t sent = 0;
  while (sent < frame.size()) {
    struct iovec iov {const_cast<char*>(frame.data()) + sent, frame.size() - sent};
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    if (sent == 0 && fd >= 0) {  // The descriptor rides with the first byte.
      std::memset(control, 0, sizeof(control));
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    if (!Ready(sock, POLLOUT, timeout_ms, deadline))
      return absl::DeadlineExceededError("the other end does not read");
    const ssize_t w = sendmsg(sock, &msg, MSG_NOSIGNAL | (timeout_ms >= 0 ? MSG_DONTWAIT : 0));
    if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (w <= 0) return absl::UnavailableError(absl::StrCat("send: ", strerror(errno)));
    sent += static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

absl::Status ReceiveFrame(int sock, uint32_t max_bytes, int timeout_ms, std::string* bytes,
                          int* fd) {
  *fd = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string got;
  uint64_t want = 4;
  auto fail = [&](absl::Status s) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
    return s;
  };
  while (got.size() < want) {
    if (!Ready(sock, POLLIN, timeout_ms, deadline))
      return fail(absl::DeadlineExceededError("no answer in time"));
    char buf[64 * 1024];
    const size_t ask = std::min<uint64_t>(sizeof(buf), want - got.size());
    struct iovec iov {buf, ask};
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    // Room for every descriptor one message may carry, so extras arrive
    // (and are closed) rather than truncate the control data.
    alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * shm::kMaxFdsPerMessage)];
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return fail(absl::UnavailableError(absl::StrCat("receive: ", strerror(errno))));
    // One descriptor, with the frame's first bytes; any other is closed.
    std::vector<int> fds;
    shm::TakeDescriptors(&msg, *fd < 0 && got.empty() ? 1 : 0, &fds);
    if (!fds.empty()) *fd = fds[0];
    if (r == 0) return fail(absl::UnavailableError("the other end has gone"));
    if (msg.msg_flags & MSG_CTRUNC) return fail(Malformed("frame's descriptor"));
    got.append(buf, static_cast<size_t>(r));
    if (want == 4 && got.size() >= 4) {
      uint32_t n;
      std::memcpy(&n, got.data(), 4);
      if (n > max_bytes) return fail(Malformed("frame length"));
      want = 4 + uint64_t{n};
    }
  }
  *bytes = got.substr(4);
  return absl::OkStatus();
}

std::string EncodeRequest(const Request& r) {
  Writer w;
  w.U64(r.file_size);
  w.U32(static_cast<uint32_t>(r.names.size()));
  for (const std::string& n : r.names) w.Str(n);
  return w.Take();
}

absl::StatusOr<Request> DecodeRequest(const std::string& bytes) {
  Reader in(bytes);
  Request r;
  r.file_size = in.U64();
  r.names.resize(in.Count(4, kMaxNames));
  for (std::string& n : r.names) n = in.Str(kMaxRequestBytes);
  if (!in.done()) return Malformed("request");
  return r;
}

std::string EncodeAnswer(const Answer& a) {
  Writer w;
  w.U32(static_cast<uint32_t>(a.datasets.size()));
  for (const absl::StatusOr<Dataset>& d : a.datasets) {
    if (!d.ok()) {
      w.U8(static_cast<uint8_t>(d.status().code()));
      w.Str(std::string(d.status().message()));
      continue;
    }
    w.U8(0);
    w.U64s(d->dims);
    w.U8(d->plain);
    w.U8(d->is_float);
    w.U8(d->is_signed);
    w.U8(d->big_endian);
    w.U8(d->size);
    w.U8(static_cast<uint8_t>(d->layout));
    w.U8(d->allocated);
    w.U64(d->offset);
    w.U64(d->stored);
    w.Str(d->compact);
    w.U64s(d->chunk);
    w.U32(static_cast<uint32_t>(d->filters.size()));
    for (const Filter& f : d->filters) {
      w.U32(f.id);
      w.U32(f.flags);
    }
    w.U32(static_cast<uint32_t>(d->chunks.size()));
    for (const Chunk& c : d->chunks) {
      w.U64(c.offset);
      w.U64(c.size);
      w.U32(c.mask);
    }
    w.Str(d->fill);
  }
  return w.Take();
}

absl::StatusOr<Answer> DecodeAnswer(const std::string& bytes) {
  Reader in(bytes);
  Answer a;
  const uint32_t n = in.Count(1, kMaxNames);
  for (uint32_t k = 0; k < n && in.ok(); ++k) {
    const uint8_t code = in.U8();
    if (code != 0) {
      const std::string message = in.Str(kMaxRequestBytes);
      if (code > static_cast<uint8_t>(absl::StatusCode::kUnauthenticated))
        return Malformed("status code");
      a.datasets.emplace_back(absl::Status(static_cast<absl::StatusCode>(code), message));
      continue;
    }
    Dataset d;
    d.dims = in.U64s(kMaxRank);
    d.plain = in.U8() != 0;
    d.is_float = in.U8() != 0;
    d.is_signed = in.U8() != 0;
    d.big_endian = in.U8() != 0;
    d.size = in.U8();
    const uint8_t layout = in.U8();
    if (layout > static_cast<uint8_t>(Layout::kCompact)) return Malformed("layout");
    d.layout = static_cast<Layout>(layout);
    d.allocated = in.U8() != 0;
    d.offset = in.U64();
    d.stored = in.U64();
    d.compact = in.Str(kMaxAnswerBytes);
    d.chunk = in.U64s(kMaxRank);
    d.filters.resize(in.Count(8, 32));
    for (Filter& f : d.filters) {
      f.id = in.U32();
      f.flags = in.U32();
    }
    d.chunks.resize(in.Count(20, kMaxChunks));
    for (Chunk& c : d.chunks) {
      c.offset = in.U64();
      c.size = in.U64();
      c.mask = in.U32();
    }
    d.fill = in.Str(16);
    a.datasets.emplace_back(std::move(d));
  }
  if (!in.done()) return Malformed("answer");
  return a;
}

}  // namespace h5probe
}  // namespace stoker
