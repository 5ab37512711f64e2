// A ring's batches in slabs: each slot's fields copied, after the slot is
// filled and before it is published, into a slab of that slot's own (a
// GPU's memory, or host memory standing in for it), so that the trainer
// finds its batch where it trains (batch_slabs.h gives the slabs and their
// fences; FORMAT.md, "Batches in slabs", the protocol).
//
// Slot s's slab holds the slot's field regions as the ring lays them out:
// from fields[0].offset to the slot's end, field f at fields[f].offset -
// fields[0].offset. One copy per batch moves them all. The ring's slot
// states still say which batch a slot holds; slab s's fence says when that
// batch's bytes are in the slab and when the trainer is done with them.
// Both sides count the batches each slot carried (the k of batch_slabs.h):
// every batch the daemon publishes in slot s is the one the trainer takes
// next from it.
//
// The daemon (SlabRingWriter): after claiming slot s, AwaitWritable(s)
// (the trainer is done with the slot's last batch), fill the slot as
// always, Deliver(s, view), then Publish. The trainer (SlabRingReader):
// after acquiring slot s, Await(s), use Field(s, f), Release(s) before
// releasing the slot. A trainer that releases the slot but not the slab
// holds only its own ring, for as long as it keeps the slab (the daemon
// waits until its session stops), and a fence no batch can explain is
// FAILED_PRECONDITION there at once. Calls for a slot out of range do
// nothing (INVALID_ARGUMENT where they return a status).
//
// Thread-safety: calls for different slots may come from different
// threads; calls for one slot are ordered by the ring (claim, fill,
// publish; acquire, release).
#ifndef STOKER_SHM_SLAB_RING_H_
#define STOKER_SHM_SLAB_RING_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shm/batch_slabs.h"
#include "shm/ring.h"

namespace stoker::shm {

// The bytes of one slot's slab: the slot's field regions.
uint64_t SlabBytes(const RingLayout& layout);

// What the two sides share: a slab per slot, their fences, and how many
// batches each slot has carried.
class SlabRing {
 public:
  uint32_t slots() const { return static_cast<uint32_t>(slabs_.size()); }
  const Slab& slab(uint32_t slot) const { return *slabs_[slot]; }
  const SlabFences& fences() const { return fences_; }
  // The address (host or device, as the slabs' kind) of field `f` of slot
  // `slot`'s slab; null for a slot or field out of range.
  void* Field(uint32_t slot, uint32_t f) const;

 protected:
  SlabRing(const RingLayout& layout, std::vector<std::unique_ptr<Slab>> slabs,
           SlabFences fences);
  // Batches slot `slot` carried so far (relaxed: the ring orders them).
  uint64_t Uses(uint32_t slot) const { return uses_[slot].load(std::memory_order_relaxed); }
  void Used(uint32_t slot) { uses_[slot].fetch_add(1, std::memory_order_relaxed); }

  const RingLayout layout_;
  std::vector<std::unique_ptr<Slab>> slabs_;
  SlabFences fences_;
  std::unique_ptr<std::atomic<uint64_t>[]> uses_;
};

class SlabRingWriter : public SlabRing {
 public:
  // Slabs of `memory`'s kind, one per slot of `layout`.
  static absl::StatusOr<std::unique_ptr<SlabRingWriter>> Create(SlabMemory* memory,
                                                                const RingLayout& layout);
  // Descriptors for the trainer, in the order Import takes them: the
  // fences', then each slab's (the caller closes them); then this side's
  // own descriptors are closed (Slab::Handed): once only, FAILED_PRECONDITION
  // after.
  absl::StatusOr<std::vector<int>> HandOver();
  // Waits until the trainer is done with slot `slot`'s last batch.
  absl::Status AwaitWritable(uint32_t slot, absl::Time deadline,
                             const std::atomic<bool>* cancel = nullptr) const;
  // Copies `view`'s fields (slot `slot`'s, filled) into its slab and marks
  // the batch written. Call it once per AwaitWritable, before Publish.
  absl::Status Deliver(uint32_t slot, const SlotView& view);
  // The trainer is gone: every slab's memory goes (Slab::Discard).
  void Discard();

 private:
  using SlabRing::SlabRing;
  bool handed_ = false;
};

class SlabRingReader : public SlabRing {
 public:
  // The trainer's: `fds` as Share gave them (the caller keeps them), each
  // slab checked to be SlabBytes(layout) long (Import's errors), and
  // INVALID_ARGUMENT for another number of descriptors than slots + 1.
  static absl::StatusOr<std::unique_ptr<SlabRingReader>> Import(SlabMemory* memory,
                                                                const RingLayout& layout,
                                                                const std::vector<int>& fds);
  // Waits until slot `slot`'s batch (the one just acquired) is in its slab.
  absl::Status Await(uint32_t slot, absl::Time deadline,
                     const std::atomic<bool>* cancel = nullptr) const;
  // Done with it; before the slot itself is released. A GPU's slab: the
  // caller has finished the work that reads it (the daemon writes it next).
  void Release(uint32_t slot);

 private:
  using SlabRing::SlabRing;
};

}  // namespace stoker::shm

#endif  // STOKER_SHM_SLAB_RING_H_
