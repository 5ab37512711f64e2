// A Batch's hold on its ring slot (client.h): the slot goes back to the
// producer when the last copy of the Batch goes. `keep` holds the
// session's ring mapping (and its control stream) as long as any batch of
// it is alive. A private copy (Copy) holds no slot: its valid samples'
// bytes were copied out of the slot, which went back at once. Private to
// the client library. With slabs (SessionSpec.slabs) the slot's slab is
// held with it, and given back first.
#ifndef STOKER_CLIENT_CPP_BATCH_LEASE_H_
#define STOKER_CLIENT_CPP_BATCH_LEASE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "client/cpp/client.h"
#include "shm/ring.h"
#include "shm/slab_ring.h"

namespace stoker {

struct Batch::Lease {
  Lease(std::shared_ptr<const void> k, shm::RingConsumer* r, shm::SlabRingReader* sl, int s,
        const shm::SlotSnapshot& snap)
      : keep(std::move(k)), ring(r), slabs(sl), slot(s), view(r->Slot(s)), snapshot(snap) {}
  ~Lease() { Return(); }
  // Gives the slot back, its slab first (a private copy has none).
  void Return() {
    if (slot < 0) return;
    if (slabs != nullptr) slabs->Release(slot);
    ring->Release(slot);
  }
  // Slot `s`, just acquired, as a batch: held, or, when it is the last
  // slot the application does not hold (kept, it would leave the daemon
  // none to fill), its valid samples copied to memory of the batch's own
  // (laid out as a slot, 4096-aligned) and the slot released. Where that
  // memory cannot be had, the slot is held.
  static std::shared_ptr<const Lease> Take(std::shared_ptr<const void> k, shm::RingConsumer* r,
                                           shm::SlabRingReader* slabs, int s,
                                           const shm::SlotSnapshot& snap);
  // The warning a session gives at its first copy: what it holds, and how
  // to avoid copies.
  static std::string CopyWarning(uint64_t session_id, const shm::RingConsumer& ring);
  const shm::RingLayout& layout() const { return ring->layout(); }

  std::shared_ptr<const void> keep;
  shm::RingConsumer* ring;
  // The session's slabs (null without; a private copy's slab went back
  // with its slot, and it has none).
  shm::SlabRingReader* slabs;
  int slot;  // -1 for a private copy.
  shm::SlotView view;
  shm::SlotSnapshot snapshot;  // Counts as validated when the slot was taken.
  std::shared_ptr<uint8_t> copy;  // A private copy's memory, else null.
};

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_BATCH_LEASE_H_
