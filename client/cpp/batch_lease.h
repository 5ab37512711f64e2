// A Batch's hold on its ring slot (client.h): the slot goes back to the
// producer when the last copy of the Batch goes. `keep` holds the
// session's ring mapping (and its control stream) as long as any batch of
// it is alive. Private to the client library.
#ifndef STOKER_CLIENT_CPP_BATCH_LEASE_H_
#define STOKER_CLIENT_CPP_BATCH_LEASE_H_

#include <memory>
#include <utility>

#include "client/cpp/client.h"
#include "shm/ring.h"

namespace stoker {

struct Batch::Lease {
  Lease(std::shared_ptr<const void> k, shm::RingConsumer* r, int s, const shm::SlotSnapshot& snap)
      : keep(std::move(k)), ring(r), slot(s), view(r->Slot(s)), snapshot(snap) {}
  ~Lease() { ring->Release(slot); }
  const shm::RingLayout& layout() const { return ring->layout(); }

  std::shared_ptr<const void> keep;
  shm::RingConsumer* ring;
  int slot;
  shm::SlotView view;
  shm::SlotSnapshot snapshot;  // Counts as validated when the slot was taken.
};

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_BATCH_LEASE_H_
