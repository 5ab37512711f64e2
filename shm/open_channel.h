// The caller's opener: how the daemon opens a trainer's files with the
// trainer's own rights, so the kernel decides every open with the
// trainer's uid, gids and groups, whatever the daemon runs as.
//
// The client library keeps one end of a SOCK_SEQPACKET socket pair and a
// descriptor of the dataset's folder, and hands the other end to the daemon
// with that folder (the ring socket's "STOKER-ROOT 2" exchange,
// shm/fd_passing.h). The daemon sends the paths it needs, relative to the
// folder; the client opens them in it (OpenInFolder) and answers with
// descriptors.
//
// Wire format, one datagram each way per request (many paths a request):
//   request = u32 id, u32 count, then count x (u8 op, path bytes, NUL)
//   answer  = u32 id, u32 count, then count x i32 errno; where the request
//             held a kSign entry, then count x u32 length and the entries'
//             texts; the descriptors of the entries whose errno is 0
//             follow as SCM_RIGHTS, in order.
// Ops: kOpenFile (O_RDONLY) and kOpenFolder (O_RDONLY | O_DIRECTORY), both
// O_NONBLOCK | O_NOCTTY | O_CLOEXEC, opened by OpenInFolder ("." is the
// folder itself); kSign, whose "path"
// is a request to sign (server/objstore/s3_signing.h) and whose text is
// the signature, or, with an errno, the client's reason to refuse.
//
// The same channel, with no folder, is the client's signer for a session
// whose dataset is in an object store (ServeSigner): the daemon has each
// request signed and never holds the trainer's secret.
//
// OpenServer is the client's end: threads of its own (never the trainer's
// Python thread) serve requests until the daemon closes its end or the
// server is destroyed. OpenChannel is the daemon's end: Open() may be
// called from any number of threads at once; answers are matched to their
// requests by id. The client is untrusted: every descriptor it sends is
// checked (as many as the answer says, each readable and not O_PATH) or
// closed, and a malformed answer, or none within the deadline, breaks the
// channel: every later Open is UNAVAILABLE at once. Both are thread-safe;
// each owns its socket.
#ifndef STOKER_SHM_OPEN_CHANNEL_H_
#define STOKER_SHM_OPEN_CHANNEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace stoker::shm {

enum class OpenOp : uint8_t { kOpenFile = 1, kOpenFolder = 2, kSign = 3 };

// How a dataset's path is opened in its folder, on either side of the
// channel: `relative` to `folder_fd` with openat2 and `flags`, following
// symlinks wherever they lead, as the caller's own open would (the kernel
// checks the caller's rights; the daemon checks what it is handed), but
// never through a magic link (/proc/<pid>/fd/N); an absolute path or one
// with a ".." component is EXDEV, unopened. A descriptor, or -1 with errno
// set.
int OpenInFolder(int folder_fd, const char* relative, uint64_t flags);

// The client's signer: a signature for a request to sign, or an error
// whose message tells the daemon's caller why not. Called on the server's
// own threads, several at once.
using SignFn = std::function<absl::StatusOr<std::string>(const std::string& request)>;

// The most paths one request carries, and their bytes in all.
inline constexpr size_t kMaxOpensPerRequest = 128;
inline constexpr size_t kMaxRequestBytes = 64 * 1024;
// The most bytes of text one answer carries, all entries together, and of
// a refusal's words kept in Sign's error.
inline constexpr size_t kMaxAnswerText = 16 * 1024;
inline constexpr size_t kMaxRefusalShown = 512;

// Both ends of a new SOCK_SEQPACKET pair: {the client's, the daemon's}.
absl::StatusOr<std::pair<int, int>> OpenChannelPair();

class OpenServer {
 public:
  // Serves requests on `sock` with `threads` threads, opening beneath
  // `folder_fd` (-1: opens nothing, EACCES) and signing with `sign` (null:
  // signs nothing, EINVAL). Takes both descriptors.
  OpenServer(int sock, int folder_fd, int threads = 4, SignFn sign = nullptr);
  ~OpenServer();  // Stops serving: the daemon's next Open is UNAVAILABLE.
  OpenServer(const OpenServer&) = delete;
  OpenServer& operator=(const OpenServer&) = delete;

  uint64_t opened() const;  // Descriptors handed over (tests).

 private:
  void Serve();
  const int sock_, folder_fd_;
  const SignFn sign_;
  std::vector<std::thread> threads_;
  mutable absl::Mutex mu_;
  uint64_t opened_ ABSL_GUARDED_BY(mu_) = 0;
};

// The client's side of a proof of `folder`: opens it (O_RDONLY |
// O_DIRECTORY; NOT_FOUND / PERMISSION_DENIED naming it when this user
// cannot), makes a channel pair and serves the folder's paths. The
// daemon is handed `folder_fd` and `channel_fd`, which the caller closes
// once sent; `server` serves for as long as it lives.
struct ServedFolder {
  int folder_fd = -1;
  int channel_fd = -1;
  std::unique_ptr<OpenServer> server;
};
absl::StatusOr<ServedFolder> ServeFolder(const std::string& folder);

// The client's signer: a channel pair whose `server` signs with `sign` and
// opens nothing; the daemon is handed `channel_fd` (HandOverSigner), which
// the caller closes once sent.
struct ServedSigner {
  int channel_fd = -1;
  std::unique_ptr<OpenServer> server;
};
absl::StatusOr<ServedSigner> ServeSigner(SignFn sign);

class OpenChannel {
 public:
  // Takes `sock` (the daemon's end). `timeout`: how long one request may
  // wait for its answer before the channel is broken.
  static constexpr absl::Duration kDefaultTimeout = absl::Seconds(30);
  explicit OpenChannel(int sock, absl::Duration timeout = kDefaultTimeout);
  ~OpenChannel();
  OpenChannel(const OpenChannel&) = delete;
  OpenChannel& operator=(const OpenChannel&) = delete;

  struct Request {
    OpenOp op = OpenOp::kOpenFile;
    std::string path;  // Relative to the folder; no NUL.
  };
  // Per request, a descriptor (the caller closes it) or the client's errno
  // (*errs[i] != 0, fds[i] == -1). The call's own status is UNAVAILABLE
  // for a broken or closed channel, INVALID_ARGUMENT for requests past the
  // limits above; then nothing is open.
  absl::Status Open(const std::vector<Request>& requests, std::vector<int>* fds,
                    std::vector<int>* errs);
  // One path: its descriptor, or -1 and *err set to the client's errno.
  absl::StatusOr<int> OpenOne(OpenOp op, const std::string& path, int* err);
  // The client's signature of `request` (no NUL); UNAVAILABLE for a broken
  // or closed channel, PERMISSION_DENIED with the client's words (their
  // first kMaxRefusalShown bytes) when it refuses, UNIMPLEMENTED from a
  // client that cannot sign.
  absl::StatusOr<std::string> Sign(const std::string& request);

  // Why the channel is broken; OK while it works.
  absl::Status broken() const;
  // Breaks the channel for good (the daemon stops): every request waiting
  // and every later one is CANCELLED with `why`, at once.
  void Cancel(absl::string_view why);

 private:
  struct Pending {
    bool done = false;
    std::vector<int> fds, errs;
    std::vector<std::string> texts;  // Empty when the answer carried none.
    std::vector<bool> opens;  // Which entries are opens (have a descriptor).
  };
  // Sends `requests` and waits for their answer into *mine.
  absl::Status Exchange(const std::vector<Request>& requests, Pending* mine);
  // Receives one answer and hands it to its Pending; breaks the channel on
  // anything malformed. Called by one waiter at a time, without mu_.
  absl::Status ReceiveOne(absl::Time deadline);
  void Break(absl::Status why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int sock_;
  const absl::Duration timeout_;
  mutable absl::Mutex mu_;
  uint32_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool receiving_ ABSL_GUARDED_BY(mu_) = false;  // A waiter is in ReceiveOne.
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint32_t, Pending*> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker::shm

#endif  // STOKER_SHM_OPEN_CHANNEL_H_
