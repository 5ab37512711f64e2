// Process-local views of a prefetch ring (layout: ring_data.h, FORMAT.md).
//
// RingProducer (daemon side) creates and owns the segment (a sealed memfd,
// segment.h) and hands descriptors of it out; its destructor unmaps it. One producer thread claims slots in sequence
// order and publishes them; any thread may write sample data into a claimed
// slot, and Publish() must happen-after all of those writes (the caller
// provides that, e.g. with a counter decremented with acq_rel).
//
// RingConsumer (client side) maps an existing ring and hands out slots in
// sequence order, whatever order they were filled in. A RingConsumer is used
// by one thread at a time; Release() may come from any thread but must not
// race with Acquire() for the same slot (the client library serializes).
//
// Neither side ever blocks without a bound: every wait is a futex wait with
// a timeout, after which liveness (close flag, heartbeat, pid) is rechecked.
//
// Neither side trusts the other's memory (iceoryx's rule). Each keeps a
// private copy of the layout and takes every view from it, never from the
// shared header again; words the peer writes are read only through the
// accessors below, as bounded hints, never as sizes or offsets. These two
// classes are the only code that touches header words.
#ifndef STOKER_SHM_RING_H_
#define STOKER_SHM_RING_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "shm/ring_data.h"
#include "shm/segment.h"

namespace stoker::shm {

// One named field of every sample (see FieldLayout).
struct FieldGeometry {
  std::string name;
  uint32_t dtype = kDTypeUint8;
  std::vector<uint64_t> shape;  // Per sample; empty: a scalar.
};

struct RingGeometry {
  uint32_t slots = 0;
  uint32_t batch_size = 0;
  std::vector<FieldGeometry> fields;
};

// The classic two-field geometry: "image" [H, W, C] uint8 (NHWC batches) or
// [C, H, W] float (NCHW), and "label" int32.
RingGeometry ImageLabelGeometry(uint32_t slots, uint32_t batch_size,
                                uint32_t height, uint32_t width,
                                uint32_t channels, uint32_t dtype);

// The index of field `name` in `layout`, or -1.
int FindField(const RingLayout& layout, const char* name);

inline constexpr uint32_t kMaxRingSlots = 256;
inline constexpr uint32_t kMaxRingBatch = 65536;  // Samples per slot.
inline constexpr uint64_t kMaxRingBytes = 16ULL << 30;
// Of one dimension of a field (an encoded field's bytes are one).
inline constexpr uint64_t kMaxDimension = 1ULL << 27;

// Validates `g` and computes the ring's layout (offsets, strides, total
// size). INVALID_ARGUMENT naming the field for zero or absurd values
// (more than kMaxRingSlots slots or kMaxRingBytes in all, no fields, a bad
// or repeated name, an unknown dtype, a zero or too many dimensions).
absl::StatusOr<RingLayout> ComputeLayout(const RingGeometry& g);

// Views of one slot's regions.
struct SlotView {
  SlotControl* control;
  uint32_t* status;       // [batch_size], SampleStatus
  uint64_t* indices;      // [batch_size], dataset sample index
  // Per field of the layout: [batch_size * fields[f].sample_bytes].
  uint8_t* fields[kMaxFields];
};

// A slot's control fields as they were when the consumer took it (a
// consumer never reads them from shared memory again: the producer side is
// not trusted to keep them still).
struct SlotSnapshot {
  uint32_t sample_count = 0;
  uint32_t error_count = 0;
  uint64_t epoch = 0;
  uint64_t batch_index = 0;
  uint64_t sequence = 0;
};

class RingProducer {
 public:
  // Creates a segment labelled `label` for the geometry, all slots FREE.
  static absl::StatusOr<std::unique_ptr<RingProducer>> Create(
      const std::string& label, const RingGeometry& g, uint64_t session_id,
      uint64_t daemon_generation);
  ~RingProducer();  // Closes (if not yet) and unmaps.

  // Claims a FREE slot, waiting for the consumer to release one. Gives up
  // and returns -1 when `should_stop()` becomes true (checked at least every
  // 50 ms). Refreshes the producer heartbeat while waiting. With `idle`,
  // a consumer that released nothing for a whole wait (it is behind, not
  // between batches) gives the producer time for other work: `idle` is
  // called before each further wait, and when it did some (true) the
  // slots are looked at again instead of waiting.
  int Claim(const std::function<bool()>& should_stop,
            const std::function<bool()>& idle = nullptr);

  SlotView Slot(int index) const;

  // Makes a claimed slot visible to the consumer as batch `sequence`.
  void Publish(int index, uint64_t sequence, uint64_t epoch,
               uint64_t batch_index, uint32_t sample_count,
               uint32_t error_count);

  // Marks the ring closed (first reason wins) and wakes the consumer.
  void Close(CloseReason reason);
  void Heartbeat();

  // Slots published and not yet released (READY or HELD).
  uint32_t FilledSlots() const;

  // --- Words the consumer writes: hints, each bounded here.
  // The share of each batch the daemon decodes, 0..kShareOne.
  uint32_t ConsumerShare() const;
  // Nanoseconds the application waited for batches: at most the ring's age.
  uint64_t ConsumerWaitNs() const;
  // Batches handed to the application: at most the batches published.
  uint64_t ConsumerBatches() const;

  // --- Words the producer writes for the consumer.
  void SetConsumerShare(uint32_t share);  // Before the segment is handed over.
  void SetDecodeThreads(uint32_t threads);
  void AddDecodeCost(uint64_t samples, uint64_t ns);
  // RingHeader::batches_per_epoch (0: not known yet).
  void SetBatchesPerEpoch(uint64_t n);
  uint64_t BatchesPerEpoch() const;

  // The producer's private copy, written at creation; never read back.
  const RingLayout& layout() const { return layout_; }
  const std::string& name() const { return segment_.name(); }
  // A new descriptor of the segment for the consumer (Segment::Share).
  absl::StatusOr<int> Share() const { return segment_.Share(); }
  // Its consumer is gone: the pages go back to the kernel now, whoever
  // still holds a descriptor (Segment::Discard).
  void Discard() { segment_.Discard(); }

 private:
  RingProducer(Segment segment, const RingLayout& layout);

  Segment segment_;
  RingHeader* header_;
  const RingLayout layout_;
  const uint64_t created_ns_;
  std::atomic<uint64_t> published_count_{0};  // Publish() calls; relaxed.
};

class RingConsumer {
 public:
  // Maps the ring behind `fd` (handed over by the daemon, see
  // fd_passing.h; it stays the caller's) and checks magic, layout version,
  // session id and every geometry field and offset of the header against
  // the layout its geometry implies and the mapped size.
  // FAILED_PRECONDITION on a mismatch (a stale, foreign or corrupt
  // segment) or an unsealed one. The validated layout is kept privately:
  // later changes to the shared header cannot move the views.
  static absl::StatusOr<std::unique_ptr<RingConsumer>> Open(
      int fd, const std::string& label, uint64_t session_id);
  // The same over a segment already mapped.
  static absl::StatusOr<std::unique_ptr<RingConsumer>> Open(
      Segment segment, uint64_t session_id);

  // Waits for batch `sequence` and marks its slot HELD; returns the slot.
  // UNAVAILABLE when the ring was closed or the producer is gone (stale
  // heartbeat, dead pid); `extra_liveness` (may be null) is polled too and
  // its error returned. DEADLINE_EXCEEDED after `timeout`.
  // FAILED_PRECONDITION when every slot is held by the application.
  // DATA_LOSS for a slot whose counts are impossible (more samples than
  // the batch size). `snapshot` (may be null) receives the slot's fields.
  // OUT_OF_RANGE, leaving the slot READY, when its batch belongs to an
  // epoch after `last_epoch` (a pass over one epoch ended).
  absl::StatusOr<int> Acquire(
      uint64_t sequence, absl::Duration timeout,
      const std::function<absl::Status()>& extra_liveness,
      SlotSnapshot* snapshot = nullptr, uint64_t last_epoch = UINT64_MAX);

  // Returns a HELD slot to the producer.
  void Release(int index);
  // Slots this consumer holds now.
  uint32_t held() const { return held_.load(std::memory_order_relaxed); }

  SlotView Slot(int index) const;
  const RingLayout& layout() const { return layout_; }

  // --- Words the consumer writes (hints the producer bounds).
  void SetCpuShare(uint32_t share);  // Clamped to 0..kShareOne.
  void AddWait(uint64_t ns);
  void CountBatch();
  // --- Words the producer writes, as last seen (hints, for rates only).
  struct ProducerRate {
    uint64_t samples = 0, nanos = 0;
    uint32_t threads = 0, share = 0;
  };
  ProducerRate producer_rate() const;
  // RingHeader::batches_per_epoch (acquire): 0 while not known.
  uint64_t batches_per_epoch() const;
  // Waits for it to be known: Acquire's UNAVAILABLE, liveness and
  // DEADLINE_EXCEEDED; FAILED_PRECONDITION for kOpeningFailed.
  absl::StatusOr<uint64_t> WaitBatchesPerEpoch(
      absl::Duration timeout, const std::function<absl::Status()>& extra_liveness);
  uint32_t close_reason() const;  // CloseReason, or another value (corrupt).
  void* base() const { return segment_.base(); }
  uint64_t size() const { return segment_.size(); }

 private:
  RingConsumer(Segment segment, const RingLayout& layout);
  absl::Status CheckProducer() const;
  // One wait for `published` to move past `seen` (up to kPollInterval):
  // UNAVAILABLE when the ring closed before `what`, `check`'s and the
  // producer's and `extra_liveness`'s errors, DEADLINE_EXCEEDED past
  // `deadline` (`timeout` from the start).
  absl::Status WaitForPublish(uint32_t seen, absl::Time deadline, absl::Duration timeout,
                              absl::string_view what, const std::function<absl::Status()>& check,
                              const std::function<absl::Status()>& extra_liveness);
  int FindReady(uint64_t sequence) const;

  Segment segment_;
  RingHeader* header_;
  const RingLayout layout_;  // Validated copy of header_->layout.
  std::atomic<uint32_t> held_{0};  // Slots HELD by this consumer; relaxed.
};

}  // namespace stoker::shm

#endif  // STOKER_SHM_RING_H_
