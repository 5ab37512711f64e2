// The datasets being opened now (OpenSession's listing and indexing), each
// with its progress (server/dataset/opening_progress.h), for GetStats: a
// trainer waiting on a long listing sees how far it has come, and its
// client shows it. Another user's opening is shown without its dataset's
// name, as another user's session is; admins see every name.
//
// Thread-safe.
#ifndef STOKER_SERVER_DAEMON_OPENINGS_H_
#define STOKER_SERVER_DAEMON_OPENINGS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/stoker.pb.h"
#include "server/dataset/opening_progress.h"

namespace stoker {

class Openings {
 public:
  // An opening of `dataset` by `uid`'s process `pid` (0: none), listed
  // until the last holder of the returned progress drops it. The name is
  // kept as shown: at most 256 bytes, other than printable ASCII escaped.
  std::shared_ptr<OpeningProgress> Begin(int64_t uid, uint32_t pid, std::string dataset);
  // Each opening as `viewer_uid` (an admin: every name and pid) sees it.
  void AddStats(v1::DaemonStats* s, int64_t viewer_uid, bool admin) const;

 private:
  struct Entry {
    int64_t uid;
    uint32_t pid;
    std::string dataset;
    const OpeningProgress* progress;
  };
  mutable absl::Mutex mu_;
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Entry> open_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_SERVER_DAEMON_OPENINGS_H_
