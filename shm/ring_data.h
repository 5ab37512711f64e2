// The shared-memory layout of a Stoker prefetch ring (see shm/FORMAT.md).
//
// These structs live inside a POSIX shared-memory segment mapped by two
// processes: the daemon (producer) and one trainer (consumer). Nothing here
// owns memory or has behaviour; process-local views live in ring.h.
//
// Crash-safety rule: either process may die at any instruction. So every
// word the other process reads is a naturally aligned integer of at most 64
// bits (atomic where it changes after creation), there are no pointers (only
// offsets from the segment start), no locks, and no type whose copy or
// destruction has side effects. The static_asserts below enforce the parts
// the compiler can check; bump kLayoutVersion on any change to this file
// that moves, retypes or redefines a word. A word appended to RingHeader's
// tail (zero before it existed) keeps the version: a client reads it only
// when its spec asked for what fills it.
#ifndef STOKER_SHM_RING_DATA_H_
#define STOKER_SHM_RING_DATA_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "shm/dtypes.h"

namespace stoker::shm {

inline constexpr uint64_t kRingMagic = 0x474e49524b4f5453ULL;  // "STOKRING"
// 2: float32/float16 NCHW dtypes. 3: a batch is a table of named fields.
// 4: the client-decode words (the CPU share and the daemon's decode rate).
// 5: a sealed memory file handed over as a descriptor (shm/segment.h).
inline constexpr uint32_t kLayoutVersion = 5;
// consumer_cpu_share: all of a batch (1/65536 units).
inline constexpr uint32_t kShareOne = 65536;
inline constexpr uint64_t kHeaderBytes = 4096;
inline constexpr uint64_t kPageBytes = 4096;
inline constexpr uint32_t kMaxFields = 16;
inline constexpr uint32_t kMaxFieldDims = 6;
inline constexpr uint32_t kFieldNameBytes = 32;  // Including the NUL.

// Slot life cycle. Only the producer moves FREE->FILLING->READY; only the
// consumer moves READY->HELD->FREE.
enum SlotState : uint32_t {
  kSlotFree = 0,     // Producer may claim it.
  kSlotFilling = 1,  // Producer is writing samples.
  kSlotReady = 2,    // Published: `sequence` and all contents are final.
  kSlotHeld = 3,     // Consumer handed it to the application.
};

// RingHeader::batches_per_epoch of a session whose streamed opening failed.
inline constexpr uint64_t kOpeningFailed = UINT64_MAX;

// Why the producer stopped; written once to RingHeader::closed.
enum CloseReason : uint32_t {
  kOpen = 0,
  kClosedBySession = 1,   // CloseSession or client detach.
  kClosedByShutdown = 2,  // Daemon stopping.
  kClosedByError = 3,     // The session failed; see the daemon's log.
};

// Per-sample outcome, one uint32 per sample in each slot.
enum SampleStatus : uint32_t {
  kSampleOk = 0,
  kSampleReadError = 1,    // File missing, unreadable or empty.
  kSampleDecodeError = 2,  // Not decodable, or not what the field needs
                           // (its fields are zero).
  kSampleReplaced = 3,     // Failed; another sample's fields stand in
                           // (the index is still the failed one).
};

// One field of every sample: `shape` (row-major, ndim dims) of `dtype`
// elements. A slot holds the field of all batch_size samples contiguously
// at `offset`: sample i at offset + i * sample_bytes.
struct FieldLayout {
  char name[kFieldNameBytes];  // [A-Za-z0-9_]+, NUL-padded.
  uint32_t dtype;              // DType.
  uint32_t ndim;               // 0 (a scalar per sample) .. kMaxFieldDims.
  uint64_t shape[kMaxFieldDims];
  uint64_t sample_bytes;       // prod(shape) * DTypeBytes(dtype).
  uint64_t offset;             // Within a slot; 64-byte aligned, page
                               // aligned when the region is >= a page.
  uint64_t reserved[3];
};

// Geometry of a ring: plain integers, written once by the producer before
// the segment's name is given to anyone, never changed after.
struct RingLayout {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t header_bytes;
  uint64_t segment_bytes;
  uint32_t slot_count;
  uint32_t batch_size;    // Sample capacity of a slot.
  uint32_t field_count;   // 1..kMaxFields; fields[field_count..] are zero.
  uint32_t reserved0;
  uint64_t slots_offset;  // From segment start to slot 0.
  uint64_t slot_stride;   // Between consecutive slots; a multiple of 4096.
  // Offsets within a slot.
  uint64_t status_offset;  // uint32_t[batch_size], SampleStatus
  uint64_t index_offset;   // uint64_t[batch_size], dataset sample index
  FieldLayout fields[kMaxFields];
};

struct RingHeader {
  // --- Written once by the producer before the segment is handed to anyone.
  RingLayout layout;
  uint64_t session_id;
  uint64_t daemon_generation;  // Random per daemon start.
  uint32_t daemon_pid;
  uint32_t reserved0;

  // --- Live words. Futex words are 32-bit and only ever incremented.
  // Bumped (release) after every publish; consumers wait on it.
  std::atomic<uint32_t> published;
  // Bumped (release) after every release; the producer waits on it.
  std::atomic<uint32_t> released;
  // CloseReason; set once (release) by the producer, then `published` is
  // bumped and woken so a waiting consumer notices at once.
  std::atomic<uint32_t> closed;
  uint32_t reserved1;
  // CLOCK_MONOTONIC nanoseconds (system-wide), stored relaxed: a staleness
  // hint only, never used for ordering.
  std::atomic<uint64_t> producer_heartbeat_ns;
  std::atomic<uint64_t> consumer_heartbeat_ns;
  // Consumer-side accounting, written relaxed by the consumer and read by
  // the daemon for metrics: total nanoseconds the application spent blocked
  // waiting for a batch, and batches handed to the application.
  std::atomic<uint64_t> consumer_wait_ns;
  std::atomic<uint64_t> consumer_batches;
  // Client decode (SessionSpec.client_decode), all relaxed. The consumer
  // writes the share of each batch the daemon decodes itself (0..kShareOne;
  // the producer sets the spec's before naming the segment and reads it as
  // it starts each batch). The producer counts the samples it decoded and
  // their decode + transform time summed over threads, and the decode
  // threads the session can count on (its fair part of its node's pool), so
  // the consumer can weigh the daemon's rate against its own.
  std::atomic<uint32_t> consumer_cpu_share;
  std::atomic<uint32_t> producer_decode_threads;
  std::atomic<uint64_t> producer_cpu_samples;
  std::atomic<uint64_t> producer_cpu_ns;
  // Batches per epoch for this rank, stored (release) by the producer
  // before any batch is published, or, while the dataset's opening
  // streams (SessionSpec.streamed_opening), 0 until it ends: then before
  // any batch past what its first windows held, or kOpeningFailed (the
  // ring closes with kClosedByError after the batches those held).
  std::atomic<uint64_t> batches_per_epoch;
};

struct SlotControl {
  std::atomic<uint32_t> state;  // SlotState; release on every transition.
  uint32_t sample_count;        // Valid samples (< batch_size at epoch end).
  // The global batch number, counted from the session's start position.
  // Written (relaxed) before `state` becomes READY; read after an acquire
  // load of `state` observes READY.
  std::atomic<uint64_t> sequence;
  uint64_t epoch;
  uint64_t batch_index;  // Within the epoch.
  uint32_t error_count;  // Samples whose status is not kSampleOk.
  uint32_t reserved0;
  uint64_t reserved1[3];
};

// Enforced crash-safety and layout rules.
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == 4);
static_assert(sizeof(std::atomic<uint64_t>) == 8);
static_assert(std::is_trivially_copyable_v<RingLayout>);
static_assert(sizeof(FieldLayout) == 128);
static_assert(offsetof(RingLayout, fields) % 8 == 0);
static_assert(std::is_standard_layout_v<RingHeader>);
static_assert(std::is_standard_layout_v<SlotControl>);
static_assert(std::is_trivially_destructible_v<RingHeader>);
static_assert(std::is_trivially_destructible_v<SlotControl>);
static_assert(sizeof(RingHeader) <= kHeaderBytes);
static_assert(sizeof(SlotControl) == 64);
static_assert(offsetof(RingHeader, published) % 8 == 0);
static_assert(offsetof(RingHeader, producer_heartbeat_ns) % 8 == 0);
static_assert(offsetof(RingHeader, consumer_wait_ns) % 8 == 0);
static_assert(offsetof(RingHeader, batches_per_epoch) % 8 == 0);
static_assert(offsetof(SlotControl, sequence) % 8 == 0);

}  // namespace stoker::shm

#endif  // STOKER_SHM_RING_DATA_H_
