// Which sessions keep their exact pictures in the pixel cache: the claims
// of the sessions' estimates against the cache's bytes, shared fairly by
// user. A claim is for content (a dataset's pictures as one kind of
// decode makes them): a user's sessions over the same content (the ranks
// of a job on one node) fill the same entries and hold one claim. A claim
// is granted while the claimant's user, with it, stays within its share
// (the cache's bytes over the users holding claims, the claimant's
// included) and all claims fit the cache. A user's claims over the share
// a newcomer's grant leaves it are revoked, newest first: its sessions
// stop keeping, and the LRU takes their pictures as the newcomer's come in
// (they ask again after a release). So a dataset that does not fit is not
// kept, and no user's pictures push out another's within that user's
// share. Another user's sessions over content a standing claim keeps (a
// shared dataset) join that claim: their pictures are those entries, and
// nothing more is charged; the claim passes to them when its user leaves.
//
// Thread-safe.
#ifndef STOKER_SERVER_CACHE_PIXEL_SHARES_H_
#define STOKER_SERVER_CACHE_PIXEL_SHARES_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace stoker {

class PixelShares {
 public:
  explicit PixelShares(uint64_t capacity) : capacity_(capacity) {}

  // What a session holds: whether its claim still stands (cleared when a
  // newcomer's share revoked it). Read without locks.
  struct Claim {
    std::atomic<bool> granted{false};
  };

  // Session `session` of `uid` claims `bytes` for `content` (again, or
  // another session of the same user and content: the new estimate
  // replaces the old). Granted: the returned claim is set. Refused: null,
  // and *why says how much was needed and what there is.
  std::shared_ptr<const Claim> Ask(uint64_t session, const std::string& content, int64_t uid,
                                   uint64_t bytes, std::string* why);
  // Session `session` keeps nothing more (closed, or gave up); a claim no
  // session holds is gone.
  void Release(uint64_t session);

  // How many times a claim was released: room a claimant refused or
  // revoked before may find now (it asks again).
  uint64_t released() const { return released_.load(std::memory_order_relaxed); }
  // How many times a claim was revoked: a holder looks at its own then.
  // (Ordered after the claim's `granted` store: a holder that sees the
  // count move sees its claim's state.)
  uint64_t revoked() const { return revoked_.load(); }

  uint64_t capacity() const { return capacity_; }
  uint64_t claimed() const;
  // The share each user has now (the cache over the users with claims).
  uint64_t share() const;

 private:
  struct Held {
    int64_t uid;  // Charged.
    std::string content;
    uint64_t bytes;
    uint64_t order;  // Grant order: the newest is revoked first.
    std::shared_ptr<Claim> claim;
    std::map<uint64_t, int64_t> sessions;  // And their users.
  };
  uint64_t Users(int64_t also) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t UserBytes(int64_t uid, const std::string& except) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Drop(std::map<std::string, Held>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t capacity_;
  mutable absl::Mutex mu_;
  // By user and content ("<uid>|<content>").
  std::map<std::string, Held> held_ ABSL_GUARDED_BY(mu_);
  uint64_t next_order_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> released_{0}, revoked_{0};
};

}  // namespace stoker

#endif  // STOKER_SERVER_CACHE_PIXEL_SHARES_H_
