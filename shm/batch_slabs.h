// Batches kept outside the ring's segment, each slot's in a slab of its
// own (a GPU's memory, or host memory standing in for it), handed to the
// trainer by descriptor and ordered by fences.
//
// The protocol, per ring (slot s writes into slab s):
//   - The daemon makes the slabs (SlabMemory::Create) and a SlabFences, and
//     passes each one's descriptor once over the ring socket
//     (fd_passing.h); the trainer imports each once (Import, which checks
//     its size). No process id or IPC namespace is shared: a descriptor
//     crosses PID namespaces where a cudaIpc handle does not.
//   - Each slab has a fence, a 32-bit count in the fences' page (counts
//     wrap modulo 2^32). For the slab's k-th batch (k = 0, 1, ...) the
//     daemon waits until the count is 2k (the trainer is done with batch
//     k-1; 0 for the first), writes, makes the bytes visible (a GPU's
//     stream synchronized) and sets it to 2k+1; the trainer waits until
//     it is 2k+1, uses the batch and sets it to 2k+2.
//   - The trainer maps the page read-write and may write anything: the
//     daemon takes a count as the trainer's release only when it is
//     exactly the one due, and any value the protocol cannot hold at
//     that point is FAILED_PRECONDITION for that ring alone. A trainer
//     that never releases holds only its own ring, until the deadline.
//
// Waits sleep on the count (a futex) and end at a deadline or when
// `cancel` is raised (checked every kCancelPoll). The daemon passes a
// finite deadline or a cancel: a wait with neither lasts as long as the
// trainer wants. Slab numbers are below slabs(): Written and Released of
// another number do nothing, and the waits refuse it.
//
// Thread-safety: a SlabMemory and its slabs may be used from any thread;
// a SlabFences is shared memory: one waiter per slab and side.
#ifndef STOKER_SHM_BATCH_SLABS_H_
#define STOKER_SHM_BATCH_SLABS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shm/segment.h"

namespace stoker::shm {

inline constexpr absl::Duration kCancelPoll = absl::Milliseconds(50);

// One slab: `bytes()` of memory at `data()` (a host address, or a device
// address for a GPU's slabs). Freed with the object.
class Slab {
 public:
  virtual ~Slab() = default;
  virtual uint64_t bytes() const = 0;
  virtual void* data() const = 0;
  // Copies `n` bytes from host memory into the slab at `offset`, or out of
  // it (a GPU's slabs: synchronous copies). OUT_OF_RANGE past its end.
  absl::Status Write(uint64_t offset, const void* from, uint64_t n) const;
  absl::Status Read(uint64_t offset, void* to, uint64_t n) const;
  // A new descriptor of the slab to pass to the trainer (close-on-exec;
  // the caller closes it). FAILED_PRECONDITION for an imported slab.
  virtual absl::StatusOr<int> Export() const = 0;
  // The daemon's, for a trainer that is gone: host memory goes back to the
  // kernel now, whoever still holds the slab (it reads zeros); a GPU's
  // goes when its last holder lets it go.
  virtual void Discard() {}
  // The daemon's, once Export's descriptor is on its way to the trainer
  // (handed over once, for good): a host slab closes its own (Export fails
  // after; Discard still works), so a session's slabs hold no descriptor
  // of the daemon's.
  virtual void Handed() {}

 protected:
  // The copies, within the slab (Write and Read checked the range).
  virtual absl::Status CopyIn(uint64_t offset, const void* from, uint64_t n) const = 0;
  virtual absl::Status CopyOut(uint64_t offset, void* to, uint64_t n) const = 0;
};

// Where slabs live.
class SlabMemory {
 public:
  virtual ~SlabMemory() = default;
  virtual std::string kind() const = 0;  // "host", "cuda".
  // The memory a slab of `bytes` takes (rounded up to pages, or to the
  // GPU's allocation granularity).
  virtual uint64_t Footprint(uint64_t bytes) const = 0;
  // The daemon's: a slab of `bytes` (> 0), every page allocated now.
  virtual absl::StatusOr<std::unique_ptr<Slab>> Create(uint64_t bytes) = 0;
  // The trainer's: the slab `fd` names (the caller keeps `fd`), which must
  // be `bytes` long: INVALID_ARGUMENT otherwise, FAILED_PRECONDITION for a
  // descriptor that is not a slab of this kind.
  virtual absl::StatusOr<std::unique_ptr<Slab>> Import(int fd, uint64_t bytes) = 0;
};

// Host memory: sealed memfd segments (segment.h), mapped by both sides.
std::unique_ptr<SlabMemory> HostSlabMemory();

// The fences of one ring's slabs.
class SlabFences {
 public:
  // The daemon's: `slabs` counts (1..65536), all 0.
  static absl::StatusOr<SlabFences> Create(uint32_t slabs);
  // The trainer's, from the daemon's descriptor (the caller keeps `fd`).
  static absl::StatusOr<SlabFences> Map(int fd, uint32_t slabs);
  // A descriptor to pass to the trainer (the daemon's side only).
  absl::StatusOr<int> Share() const { return segment_.Share(); }
  // As Slab::Handed: the daemon's own descriptor is closed.
  void Handed() { segment_.CloseDescriptor(); }
  uint32_t slabs() const { return slabs_; }

  // The daemon: waits until the trainer is done with `slab`'s batch
  // `batch` - 1 (at once for batch 0); then Written once its bytes are in.
  absl::Status AwaitWritable(uint32_t slab, uint64_t batch, absl::Time deadline,
                             const std::atomic<bool>* cancel = nullptr) const;
  void Written(uint32_t slab, uint64_t batch) const;
  // The trainer: waits until `slab`'s batch `batch` is written; Released
  // once it is done with it.
  absl::Status AwaitReadable(uint32_t slab, uint64_t batch, absl::Time deadline,
                             const std::atomic<bool>* cancel = nullptr) const;
  void Released(uint32_t slab, uint64_t batch) const;

  // The count itself, for tests and stats.
  uint32_t Count(uint32_t slab) const { return Word(slab)->load(std::memory_order_acquire); }

 private:
  SlabFences(Segment segment, uint32_t slabs) : segment_(std::move(segment)), slabs_(slabs) {}
  std::atomic<uint32_t>* Word(uint32_t slab) const;
  // Waits until the count is `due`, while it is `before`.
  absl::Status Await(uint32_t slab, uint32_t before, uint32_t due, const char* what,
                     absl::Time deadline, const std::atomic<bool>* cancel) const;
  void Set(uint32_t slab, uint32_t value) const;

  Segment segment_;
  uint32_t slabs_ = 0;
};

}  // namespace stoker::shm

#endif  // STOKER_SHM_BATCH_SLABS_H_
