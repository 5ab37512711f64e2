// Test hooks of L2Cache, kept out of its production interface: a test
// waits for the writer to commit what it queued (Flush) and holds the
// writer to see writes while they are queued (PauseWriter).
#ifndef STOKER_SERVER_CACHE_L2_CACHE_TESTING_H_
#define STOKER_SERVER_CACHE_L2_CACHE_TESTING_H_

#include "server/cache/l2_cache.h"

namespace stoker {

class L2CacheTesting {
 public:
  // Waits until everything queued so far is committed (or dropped).
  static void Flush(L2Cache& l2) { l2.Flush(); }
  // Holds the writer (queued writes wait) until resumed.
  static void PauseWriter(L2Cache& l2, bool paused) { l2.PauseWriter(paused); }
};

}  // namespace stoker

#endif  // STOKER_SERVER_CACHE_L2_CACHE_TESTING_H_
