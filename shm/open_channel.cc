#include "shm/open_channel.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "shm/fd_passing.h"
#include "util/status_macros.h"

namespace stoker::shm {

int OpenInFolder(int folder_fd, const char* relative, uint64_t flags) {
  const absl::string_view path(relative);
  bool up = !path.empty() && path[0] == '/';
  for (absl::string_view part : absl::StrSplit(path, '/')) up = up || part == "..";
  if (up) {
    errno = EXDEV;
    return -1;
  }
  struct open_how how {};
  how.flags = flags;
  how.resolve = RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(syscall(SYS_openat2, folder_fd, relative, &how, sizeof(how)));
}
namespace {

constexpr size_t kHeader = 8;  // u32 id, u32 count.

void PutU32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), 4); }
uint32_t GetU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Waits (poll) until `sock` is ready for `events` or `deadline` passes.
absl::Status WaitReady(int sock, short events, absl::Time deadline) {
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError("the client's opener did not answer in time");
    }
    struct pollfd p {sock, events, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(
                                      absl::ToInt64Milliseconds(left) + 1, 60'000)));
    if (ready > 0) return absl::OkStatus();
    if (ready < 0 && errno != EINTR) return ErrnoStatus(errno, "polling the opener channel");
  }
}

}  // namespace

absl::StatusOr<std::pair<int, int>> OpenChannelPair() {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return ErrnoStatus(errno, "socketpair(SOCK_SEQPACKET)");
  }
  return std::make_pair(sv[0], sv[1]);
}

// ------------------------------------------------------------ OpenServer

OpenServer::OpenServer(int sock, int folder_fd, int threads, SignFn sign)
    : sock_(sock), folder_fd_(folder_fd), sign_(std::move(sign)) {
  for (int i = 0; i < std::max(threads, 1); ++i) threads_.emplace_back([this] { Serve(); });
}

OpenServer::~OpenServer() {
  shutdown(sock_, SHUT_RDWR);  // Wakes every thread in recv.
  for (std::thread& t : threads_) t.join();
  close(sock_);
  if (folder_fd_ >= 0) close(folder_fd_);
}

uint64_t OpenServer::opened() const {
  absl::MutexLock lock(&mu_);
  return opened_;
}

void OpenServer::Serve() {
  std::vector<char> buf(kMaxRequestBytes + 1);
  for (;;) {
    ssize_t n;
    do {
      n = recv(sock_, buf.data(), buf.size(), 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return;  // The daemon closed its end, or we are stopping.
    if (static_cast<size_t>(n) < kHeader || static_cast<size_t>(n) > kMaxRequestBytes) continue;
    const uint32_t id = GetU32(buf.data());
    const uint32_t count = std::min<uint32_t>(GetU32(buf.data() + 4), kMaxOpensPerRequest);
    std::string answer;
    PutU32(&answer, id);
    PutU32(&answer, count);
    std::vector<int> fds;
    std::vector<std::string> texts(count);
    size_t text_bytes = 0;
    bool signs = false;
    const char* p = buf.data() + kHeader;
    const char* end = buf.data() + n;
    for (uint32_t i = 0; i < count; ++i) {
      int err = EINVAL;
      const char* nul = p < end ? static_cast<const char*>(std::memchr(p + 1, '\0', end - p - 1))
                                : nullptr;
      if (nul != nullptr) {
        const auto op = static_cast<OpenOp>(*p);
        uint64_t flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
        if (op == OpenOp::kOpenFolder) flags |= O_DIRECTORY;
        if ((op == OpenOp::kOpenFile || op == OpenOp::kOpenFolder) && folder_fd_ < 0) {
          err = EACCES;
        } else if (op == OpenOp::kOpenFile || op == OpenOp::kOpenFolder) {
          const int fd = OpenInFolder(folder_fd_, p + 1, flags);
          err = fd < 0 ? errno : 0;
          if (fd >= 0) fds.push_back(static_cast<int>(fd));
        } else if (op == OpenOp::kSign && sign_ != nullptr) {
          signs = true;
          absl::StatusOr<std::string> signature = sign_(std::string(p + 1, nul));
          err = signature.ok() ? 0 : EACCES;
          texts[i] = signature.ok() ? *std::move(signature)
                                    : std::string(signature.status().message());
          // All texts together within kMaxAnswerText: a refusal's words
          // cut, a signature that does not fit refused.
          if (text_bytes + texts[i].size() > kMaxAnswerText) {
            if (err == 0) texts[i].clear();
            err = err == 0 ? E2BIG : err;
            texts[i].resize(kMaxAnswerText - text_bytes);
          }
          text_bytes += texts[i].size();
        }
        p = nul + 1;
      } else {
        p = end;
      }
      PutU32(&answer, static_cast<uint32_t>(err));
    }
    if (signs) {
      for (const std::string& t : texts) PutU32(&answer, static_cast<uint32_t>(t.size()));
      for (const std::string& t : texts) answer.append(t);
    }
    {
      // Counted before the answer leaves, so whoever got it sees the count.
      absl::MutexLock lock(&mu_);
      opened_ += fds.size();
    }
    // A send that fails means the daemon is gone; its next Open says so.
    SendWithFds(sock_, answer, fds).IgnoreError();
    CloseFds(&fds);
  }
}

absl::StatusOr<ServedFolder> ServeFolder(const std::string& folder) {
  // O_RDONLY, not O_PATH: an O_PATH descriptor proves nothing about the
  // folder's own permissions.
  ServedFolder served;
  served.folder_fd = open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (served.folder_fd < 0) return ErrnoStatus(errno, absl::StrCat("dataset folder ", folder));
  const int mine = fcntl(served.folder_fd, F_DUPFD_CLOEXEC, 0);
  absl::StatusOr<std::pair<int, int>> pair = OpenChannelPair();
  if (mine < 0 || !pair.ok()) {
    const absl::Status s = mine < 0 ? ErrnoStatus(errno, "dup") : pair.status();
    close(served.folder_fd);
    if (mine >= 0) close(mine);
    return s;
  }
  served.channel_fd = pair->second;
  served.server = std::make_unique<OpenServer>(pair->first, mine);
  return served;
}

absl::StatusOr<ServedSigner> ServeSigner(SignFn sign) {
  STOKER_ASSIGN_OR_RETURN(auto pair, OpenChannelPair());
  ServedSigner served;
  served.channel_fd = pair.second;
  served.server = std::make_unique<OpenServer>(pair.first, -1, 4, std::move(sign));
  return served;
}

// ----------------------------------------------------------- OpenChannel

OpenChannel::OpenChannel(int sock, absl::Duration timeout) : sock_(sock), timeout_(timeout) {}

OpenChannel::~OpenChannel() {
  shutdown(sock_, SHUT_RDWR);
  close(sock_);
}

absl::Status OpenChannel::broken() const {
  absl::MutexLock lock(&mu_);
  return broken_;
}

void OpenChannel::Break(absl::Status why) {
  if (!broken_.ok()) return;
  broken_ = absl::UnavailableError(
      absl::StrCat("the client's file opener is gone (", why.message(), ")"));
  shutdown(sock_, SHUT_RDWR);
}

void OpenChannel::Cancel(absl::string_view why) {
  absl::MutexLock lock(&mu_);
  if (!broken_.ok()) return;
  broken_ = absl::CancelledError(why);
  shutdown(sock_, SHUT_RDWR);  // Wakes the waiter in ReceiveOne; the rest see broken_.
}

absl::StatusOr<int> OpenChannel::OpenOne(OpenOp op, const std::string& path, int* err) {
  std::vector<int> fds, errs;
  STOKER_RETURN_IF_ERROR(Open({Request{op, path}}, &fds, &errs));
  *err = errs[0];
  return fds[0];
}

absl::StatusOr<std::string> OpenChannel::Sign(const std::string& request) {
  Pending answer;
  STOKER_RETURN_IF_ERROR(Exchange({Request{OpenOp::kSign, request}}, &answer));
  if (answer.texts.empty()) {
    return absl::UnimplementedError(
        "the client cannot sign object store requests: it is older than the daemon");
  }
  if (answer.errs[0] != 0) {
    // Its words, cut: they reach logs and other messages.
    return absl::PermissionDeniedError(
        absl::StrCat("the client refused: ", answer.texts[0].substr(0, kMaxRefusalShown)));
  }
  return std::move(answer.texts[0]);
}

absl::Status OpenChannel::Open(const std::vector<Request>& requests, std::vector<int>* fds,
                               std::vector<int>* errs) {
  fds->assign(requests.size(), -1);
  errs->assign(requests.size(), 0);
  if (requests.empty()) return absl::OkStatus();
  Pending mine;
  STOKER_RETURN_IF_ERROR(Exchange(requests, &mine));
  for (size_t i = 0, k = 0; i < requests.size(); ++i) {
    (*errs)[i] = mine.errs[i];
    if (mine.errs[i] == 0 && mine.opens[i] && k < mine.fds.size()) (*fds)[i] = mine.fds[k++];
  }
  return absl::OkStatus();
}

absl::Status OpenChannel::Exchange(const std::vector<Request>& requests, Pending* answer) {
  if (requests.size() > kMaxOpensPerRequest) {
    return absl::InvalidArgumentError(
        absl::StrCat("at most ", kMaxOpensPerRequest, " files are opened in one request"));
  }
  std::string payload;
  PutU32(&payload, 0);  // The id, set below.
  PutU32(&payload, static_cast<uint32_t>(requests.size()));
  for (const Request& r : requests) {
    if (r.path.empty() || r.path.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError("a path to open is empty or holds a NUL byte");
    }
    payload.push_back(static_cast<char>(r.op));
    payload.append(r.path);
    payload.push_back('\0');
  }
  if (payload.size() > kMaxRequestBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("paths to open take over ", kMaxRequestBytes, " bytes in one request"));
  }
  Pending& mine = *answer;
  const absl::Time deadline = absl::Now() + timeout_;
  absl::MutexLock lock(&mu_);
  if (!broken_.ok()) return broken_;
  const uint32_t id = next_id_++;
  std::memcpy(payload.data(), &id, 4);
  pending_[id] = &mine;
  mine.errs.resize(requests.size());  // The count its answer must carry.
  for (const Request& r : requests) mine.opens.push_back(r.op != OpenOp::kSign);
  absl::Status sent = WaitReady(sock_, POLLOUT, deadline);
  if (sent.ok() && send(sock_, payload.data(), payload.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
                       static_cast<ssize_t>(payload.size())) {
    sent = ErrnoStatus(errno, "sending to the opener");
  }
  if (!sent.ok()) Break(sent);
  while (!mine.done && broken_.ok()) {
    if (!receiving_) {
      receiving_ = true;
      mu_.Unlock();
      absl::Status got = ReceiveOne(deadline);
      mu_.Lock();
      receiving_ = false;
      if (!got.ok()) Break(got);
      continue;
    }
    auto ready = [&mine, this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return mine.done || !broken_.ok() || !receiving_;
    };
    if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) {
      Break(absl::DeadlineExceededError("the client's opener did not answer in time"));
    }
  }
  pending_.erase(id);
  if (!mine.done) {
    CloseFds(&mine.fds);
    return broken_;
  }
  return absl::OkStatus();
}

absl::Status OpenChannel::ReceiveOne(absl::Time deadline) {
  STOKER_RETURN_IF_ERROR(WaitReady(sock_, POLLIN, deadline));
  std::vector<char> buf(kHeader + 8 * kMaxOpensPerRequest + kMaxAnswerText + 1);
  std::vector<char> control(CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage));
  struct iovec iov {buf.data(), buf.size()};
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  ssize_t n;
  do {
    n = recvmsg(sock_, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return absl::OkStatus();
  if (n < 0) return ErrnoStatus(errno, "reading the opener channel");
  std::vector<int> fds;
  TakeDescriptors(&msg, kMaxFdsPerMessage, &fds);
  auto refuse = [&fds](const char* why) {
    CloseFds(&fds);
    return absl::DataLossError(why);
  };
  if (n == 0) return refuse("it closed its end");
  if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) return refuse("an answer too long");
  const size_t size = static_cast<size_t>(n);
  if (size < kHeader) return refuse("a malformed answer");
  const uint32_t id = GetU32(buf.data()), count = GetU32(buf.data() + 4);
  if (count > kMaxOpensPerRequest || size < kHeader + 4 * size_t{count}) {
    return refuse("a malformed answer");
  }
  // Texts follow the errnos where the request signed: their lengths, then
  // their bytes, to the answer's end.
  std::vector<std::string> texts;
  if (size > kHeader + 4 * size_t{count}) {
    size_t at = kHeader + 4 * size_t{count};
    size_t bytes = at + 4 * size_t{count};
    if (bytes > size) return refuse("a malformed answer");
    texts.resize(count);
    for (uint32_t i = 0; i < count; ++i, at += 4) {
      const size_t len = GetU32(buf.data() + at);
      if (len > size - bytes) return refuse("a malformed answer");
      texts[i].assign(buf.data() + bytes, len);
      bytes += len;
    }
    if (bytes != size) return refuse("a malformed answer");
  }
  std::vector<int> errs(count);
  // Which entries asked for a descriptor: their request's.
  std::vector<bool> opens;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(id);
    if (it != pending_.end()) opens = it->second->opens;
  }
  if (opens.size() != count) return refuse("an answer to no request");
  size_t opened = 0;
  for (uint32_t i = 0; i < count; ++i) {
    errs[i] = static_cast<int>(GetU32(buf.data() + kHeader + 4 * i));
    if (errs[i] < 0) return refuse("a malformed answer");
    opened += opens[i] && errs[i] == 0;
  }
  if (opened != fds.size()) return refuse("an answer whose descriptors do not match it");
  // Each descriptor must have been opened for reading: an O_PATH one can be
  // had for a file its holder may not read.
  for (size_t i = 0, k = 0; i < count; ++i) {
    if (errs[i] != 0 || !opens[i]) continue;
    const int fl = fcntl(fds[k], F_GETFL);
    if (fl < 0 || (fl & O_PATH) != 0 || (fl & O_ACCMODE) == O_WRONLY) {
      close(fds[k]);
      fds.erase(fds.begin() + static_cast<long>(k));
      errs[i] = EBADF;
      continue;
    }
    ++k;
  }
  absl::MutexLock lock(&mu_);
  auto it = pending_.find(id);
  if (it == pending_.end() || it->second->errs.size() != count) {
    CloseFds(&fds);
    return absl::DataLossError("an answer to no request");
  }
  it->second->fds = std::move(fds);
  it->second->errs = std::move(errs);
  it->second->texts = std::move(texts);
  it->second->done = true;
  return absl::OkStatus();
}

}  // namespace stoker::shm
