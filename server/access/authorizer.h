// Who makes a call and which files it may read: the daemon's trust
// decisions in one unit.
//
// - Tokens prove a uid. One secret per uid for the daemon's life, issued
//   only over the ring handoff socket to the peer SO_PEERCRED names
//   (server/daemon/ring_handoff.h); Authenticate maps it back to a Caller.
// - Admins are the daemon's own user and members of `admin_gid`; they may
//   resize pools, warm caches, and close and inspect every session. Root is
//   no admin unless it is the daemon's user or in the group: uid 0 in a
//   container is not the node's operator. Admin status is re-read from the
//   group database each time a token is issued.
// - Roots: a client hands over a descriptor of its dataset's folder and
//   the daemon's end of its opener (RegisterRoot, one OpenSession of that
//   uid, a minute); Confine turns them into the Beneath every read of that
//   dataset goes through: each file opened by the client with the caller's
//   own rights (shm/open_channel.h), the daemon's own files refused
//   (FileGuard). The daemon never opens a confined caller's file itself.
// - Signers: a client hands over the daemon's end of a signer (an opener
//   with no folder, RegisterRoot with fd -1) for a session whose dataset
//   is in an object store; TakeSigner gives it to that session.
//
// Without `required` (in-process use, no handoff socket) every caller is
// the default admin Caller and nothing is confined. Thread-safe.
#ifndef STOKER_SERVER_ACCESS_AUTHORIZER_H_
#define STOKER_SERVER_ACCESS_AUTHORIZER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/stoker.pb.h"
#include "server/access/file_system.h"
#include "shm/open_channel.h"
#include "util/weak_list.h"

namespace stoker {

// Who makes a call, as the adapter established it. The default, an
// in-process caller, is an admin with no uid.
struct Caller {
  int64_t uid = -1;
  bool admin = true;
  static Caller User(uid_t uid, bool admin) {
    return Caller{static_cast<int64_t>(uid), admin};
  }
};

class Authorizer {
 public:
  // `admin_gid` < 0: no admin group.
  Authorizer(bool required, int64_t admin_gid);
  ~Authorizer();  // Closes the descriptors of roots never used.
  Authorizer(const Authorizer&) = delete;
  Authorizer& operator=(const Authorizer&) = delete;

  // Callers must present a token (a handoff socket is configured).
  bool required() const { return required_; }

  // The token of `uid`, its admin status re-evaluated now.
  std::string IssueToken(uid_t uid);
  // The caller a token stands for; UNAUTHENTICATED for an unknown one.
  absl::StatusOr<Caller> Authenticate(const std::string& token) const;
  // Takes `fd` (a folder opened by `uid`'s client) and `channel_fd` (the
  // daemon's end of that client's opener; -1: none, which Confine refuses)
  // for one confined open by that uid within a minute; returns the token
  // naming them. Expired roots are closed here. Each uid holds at most
  // kMaxPendingRootsPerUser: past it that uid's oldest is closed, never
  // another user's.
  std::string RegisterRoot(int fd, int channel_fd, uid_t uid);
  static constexpr size_t kMaxPendingRootsPerUser = 32;
  // All users together; past it the oldest root of the uid holding the
  // most is closed.
  static constexpr size_t kMaxPendingRoots = 4096;

  // The client's signer `token` names (RegisterRoot with fd -1), taken:
  // UNAUTHENTICATED when it names none of `uid`'s, or no Unix
  // SOCK_SEQPACKET socket. Every caller's, admins' too: the daemon signs for nobody.
  absl::StatusOr<std::shared_ptr<shm::OpenChannel>> TakeSigner(const std::string& token,
                                                               int64_t uid);
  // How long a signer may take to answer before its channel is broken.
  static constexpr absl::Duration kSignerTimeout = absl::Seconds(90);

  // The daemon's own files, refused to confined callers; set once they
  // exist (after L2 is open), before calls are served.
  void SetGuard(std::shared_ptr<const FileGuard> guard);
  // The folder `caller`'s dataset is confined to, proven by the spec's
  // root token (consumed); nullptr for callers that need no confinement;
  // one that opens nothing for a dataset named by URL with no local file
  // (an object store's, without a local manifest).
  // PERMISSION_DENIED naming the folder when no root, another uid's, an
  // O_PATH descriptor or no folder, no opener, or one of the daemon's own.
  absl::StatusOr<std::shared_ptr<Beneath>> Confine(const v1::DatasetSpec& spec,
                                                   const Caller& caller);

  // The daemon stops: every opener and signer channel handed out (and any
  // handed out from now on) is cancelled (OpenChannel::Cancel), so no read,
  // listing or signature waits on a client that does not answer.
  void Stop();

  // PERMISSION_DENIED "`what` is for admins ..." unless `caller` is one.
  static absl::Status RequireAdmin(const Caller& caller, const char* what);
  bool IsAdmin(uid_t uid) const;

 private:
  struct Token {
    std::string secret;
    bool admin = false;
  };
  struct Root {
    int fd = -1;
    int channel_fd = -1;
    uid_t uid = 0;
    absl::Time expires;
  };
  static void Close(const Root& root);
  // A channel over `fd`, cancelled by Stop().
  std::shared_ptr<shm::OpenChannel> Channel(int fd, absl::Duration timeout);
  const bool required_;
  const int64_t admin_gid_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const FileGuard> guard_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uid_t, Token> tokens_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Root> roots_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  WeakList<shm::OpenChannel> channels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_SERVER_ACCESS_AUTHORIZER_H_
