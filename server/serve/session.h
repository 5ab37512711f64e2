// One trainer's session: its spec, its sample plan and its ring, and the
// producer thread that keeps the ring full across epoch boundaries.
//
// The producer thread claims ring slots in sequence order and schedules one
// fetch per sample on the shared reader pool. The reader stage
// (server/serve/sample_reader.h: arrays, the caches, storage; I/O never blocks a
// decode thread) either finishes the sample in the slot or hands its files
// to the decode pool of the session's NUMA node (server/pool/node_pools.h),
// where the decode stage (server/serve/sample_renderer.h) renders it straight
// into the slot. With client decode (spec.client_decode) the first samples
// of each batch (the share the ring header holds as the batch starts) are
// the daemon's, and the rest may be handed to the client. A failed sample
// is replaced, or delivered as zeros, as spec.on_error says. The task that
// finishes a batch publishes the slot; with slabs (spec.slabs) it first
// copies the slot's fields into the slot's slab, and the producer claims a
// slot only once the trainer gave its slab back too (shm/slab_ring.h).
// Batches therefore appear in plan
// order whatever order samples finish in, and their bytes depend only on
// the spec.
//
// Thread-safety: Start/Stop/stats may be called from any thread. Stop() is
// idempotent, raises the dataset's reads_cancel (its object reads in
// flight end at once), and returns only after the producer thread has
// exited and every scheduled sample task has finished, so destroying a
// stopped ServingSession is safe. The destructor stops the session and removes its ring.
#ifndef STOKER_SERVER_SERVE_SESSION_H_
#define STOKER_SERVER_SERVE_SESSION_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/stoker.pb.h"
#include "server/cache/cache.h"
#include "server/dataset/dataset.h"
#include "server/dataset/sample_source.h"
#include "server/cache/fetcher.h"
#include "server/pool/idle_work.h"
#include "server/serve/histogram.h"
#include "server/pool/node_pools.h"
#include "server/cache/pixel_cache.h"
#include "server/cache/pixel_shares.h"
#include "server/pipeline/pipeline.h"
#include "server/serve/batch_order.h"
#include "server/serve/order_quality.h"
#include "server/serve/pixel_keeper.h"
#include "server/serve/sample_error_log.h"
#include "server/serve/sample_reader.h"
#include "server/serve/sample_renderer.h"
#include "server/pool/thread_pool.h"
#include "shm/ring.h"
#include "shm/slab_ring.h"

namespace stoker {

// Daemon-wide counters; every field is updated with relaxed atomics.
struct PipelineCounters {
  // Time per stage and sample: where time goes.
  LatencyHistogram fetch;      // Reader: caches and storage.
  LatencyHistogram decode;     // JPEG header + (region) decode.
  LatencyHistogram transform;  // Resample (+ normalize) into the slot.
  std::atomic<uint64_t> samples_decoded{0};
  std::atomic<uint64_t> samples_failed_read{0};
  std::atomic<uint64_t> samples_failed_decode{0};
  std::atomic<uint64_t> batches_published{0};
};

// What sessions share; owned by the daemon, outlives every session.
struct PipelineContext {
  ThreadPool* reader_pool;
  NodePools* decode_pools;
  int node;  // The session's NUMA node: decode runs on its pool.
  SampleFetcher* fetcher;
  ShardedLruCache* decoded_cache;  // Finished val samples.
  PixelCache* pixels;              // Bounded pictures (spec.pixel_cache).
  PipelineCounters* counters;
  uint64_t daemon_generation;
  DecodeLimits decode_limits;
  IdleWork* idle = nullptr;  // Run while the ring has no free slot; may be null.
  // The owner's uid: the pools share their threads by user first, then by
  // the user's sessions' weights.
  int64_t uid = -1;
  // Who keeps exact pictures in `pixels` (null: nobody, automatically).
  PixelShares* pixel_shares = nullptr;
  // Where decodes over kKeptDecodeBytes are charged (null: nowhere).
  MemoryBudget* decode_room = nullptr;
};

class ServingSession {
 public:
  // Creates the ring (RESOURCE_EXHAUSTED when /dev/shm is full) for a
  // spec CheckSessionSpec accepted (completed with the schema's defaults
  // here too, for callers that made it by hand), running the `pipeline` it compiled,
  // over `dataset` in the spec's order (BatchOrder: its errors);
  // INVALID_ARGUMENT when the pipeline reads
  // more files per sample than the dataset has. `admit` (may be null) is
  // asked with the ring's size (and its slabs') before anything is
  // allocated; its error is returned. With spec.slabs, SlabMemoryOfKind's
  // errors (no CUDA, no GPU at the placement's address). Call Start() to
  // begin filling it.
  static absl::StatusOr<std::unique_ptr<ServingSession>> Create(
      uint64_t id, v1::SessionSpec spec, Pipeline pipeline,
      uint32_t client_pid, std::shared_ptr<const Dataset> dataset,
      const std::string& shm_name, const PipelineContext& ctx,
      const std::function<absl::Status(uint64_t ring_bytes)>& admit = nullptr);
  ~ServingSession();

  void Start();
  void Stop(shm::CloseReason reason);

  // Refreshes the ring's producer heartbeat (the daemon's reaper calls it).
  void Heartbeat() { ring_->Heartbeat(); }

  uint64_t id() const { return id_; }
  uint32_t client_pid() const { return client_pid_; }
  // Its batches' samples; batches_per_epoch() is 0 while the dataset's
  // opening streams.
  const BatchOrder& order() const { return *order_; }
  const v1::SessionSpec& spec() const { return spec_; }
  const Pipeline& pipeline() const { return pipeline_; }
  // What a resume state must match (OrderKey).
  uint64_t order_key() const {
    return OrderKey(order_->asked(), pipeline_.order_fingerprint(), ListsBytes(*dataset_));
  }
  // The session's share weight in the pools (its spec's priority, >= 1:
  // completed and checked).
  int Weight() const { return static_cast<int>(spec_.priority()); }
  const Dataset& dataset() const { return *dataset_; }
  std::shared_ptr<const Dataset> shared_dataset() const { return dataset_; }
  const shm::RingProducer& ring() const { return *ring_; }
  // Its slabs (null without SessionSpec.slabs): handed over with the ring.
  const shm::SlabRingWriter* slabs() const { return slabs_.get(); }
  shm::SlabRingWriter* slabs() { return slabs_.get(); }
  // After Stop: the ring's pages, and its host slabs', go back to the
  // kernel (its client is gone).
  void DiscardRing() {
    ring_->Discard();
    if (slabs_ != nullptr) slabs_->Discard();
  }
  // The decode threads this session can count on (at least 1, rounded),
  // published in the ring header for a client weighing the daemon's rate
  // against its own. The daemon sets its fair part of the node's pool.
  void SetDecodeThreads(double threads);
  v1::SessionStats Stats() const;
  // Samples finished OK so far (cheap; Stats() also scans the ring).
  uint64_t samples_decoded() const {
    return decoded_.load(std::memory_order_relaxed);
  }
  // Time its samples spent in the reader stage (caches, storage, array
  // copies) and in decode + transform, summed over threads.
  uint64_t read_ns() const { return reader_.read_ns(); }
  uint64_t work_ns() const { return work_ns_.load(std::memory_order_relaxed); }

 private:
  // One batch being filled: its slot and where it stands.
  struct BatchJob {
    int slot;
    uint64_t sequence;
    uint64_t epoch;
    uint64_t batch_index;
    uint32_t count;
    uint32_t cpu_samples;  // Client decode: samples [0, cpu_samples) are the daemon's.
    std::atomic<uint32_t> remaining;
    std::atomic<uint32_t> errors{0};
  };
  // One sample position of a batch: which dataset sample is being produced
  // for it (`index`), which one the plan put there (`original`: they differ
  // when a failed sample is being replaced), and how many replacements
  // were tried.
  struct SampleTask {
    uint32_t i = 0;
    uint64_t index = 0;
    uint64_t original = 0;
    int attempt = 0;
  };

  // The session's slabs (SessionSpec.slabs), or none.
  struct Slabs {
    std::unique_ptr<shm::SlabMemory> memory;
    std::unique_ptr<shm::SlabRingWriter> writer;
  };
  ServingSession(uint64_t id, const v1::SessionSpec& spec, uint32_t client_pid,
          std::shared_ptr<const Dataset> dataset, std::unique_ptr<BatchOrder> order,
          Pipeline pipeline, std::unique_ptr<shm::RingProducer> ring, Slabs slabs,
          const PipelineContext& ctx);
  void Produce();
  // A streamed opening's end into the ring header (producer thread):
  // batches_per_epoch, or kOpeningFailed with failure_.
  void PublishOpening();
  // Stops on `s`: failure_, the batches begun published, the ring closed.
  void Fail(const absl::Status& s);
  // Counts `tasks` more in flight and runs `task` on the reader pool (node
  // < 0) or on `node`'s decode pool, where it may spill (the node that got
  // it is returned); on this thread once the session is stopped.
  int Hand(int node, uint64_t tasks, std::function<void()> task);
  // The dataset sample that stands in for failed `t` (never t.original).
  uint64_t ReplacementFor(const BatchJob& job, const SampleTask& t) const;
  static constexpr int kMaxReplacements = 8;
  // Samples a reader task finished in a run (SamplesPerTask), accounted
  // once at the run's end (Done) instead of once each. `tasks` is the
  // reader task itself: counted in flight until its last touch of the
  // session, since a sample it hands to the decode pool may finish (and
  // let Stop return) before the task does.
  struct RunTally {
    uint32_t finished = 0, decoded = 0, tasks = 0;
  };
  // A reader task: samples indices[k] into positions i + k of the job's
  // slot; whole feature rows copied in runs (SampleReader::ReadRows), any
  // other sample by FetchSampleGuarded; accounted once (Done).
  void ReadRun(const std::shared_ptr<BatchJob>& job, uint32_t i,
               const std::vector<uint64_t>& indices);
  // Finishes `n` samples ReadRows copied into positions i.. of `view`:
  // their labels, indices and status.
  void RowsRead(const shm::SlotView& view, uint32_t i, const uint64_t* indices,
                size_t n) const;
  // FetchSample behind the exception barrier: a throw is the sample's error.
  void FetchSampleGuarded(const std::shared_ptr<BatchJob>& job, const SampleTask& t,
                          RunTally* run = nullptr);
  // Reader stage (reader_), then the decode stage on the session's node.
  // With `run`, a sample finished here is tallied there.
  void FetchSample(const std::shared_ptr<BatchJob>& job, const SampleTask& t, RunTally* run);
  // Decode stage (renderer_), and the decoded cache's fill.
  void DecodeSample(const std::shared_ptr<BatchJob>& job, const SampleTask& t,
                    const FetchedSample& in);
  // Records the sample's outcome (or, for a failure under ON_ERROR_REPLACE,
  // starts on a replacement), then Done(1), or tallies it in `run`.
  void FinishSample(const std::shared_ptr<BatchJob>& job, const SampleTask& t,
                    shm::SampleStatus status, const absl::Status& error,
                    RunTally* run = nullptr);
  // Accounts `run`'s samples (and its reader task) as finished: the
  // batch's last sample publishes it.
  void Done(const std::shared_ptr<BatchJob>& job, const RunTally& run);
  // Sample i's place in the job's slot.
  SampleOut OutOf(const BatchJob& job, uint32_t i) const;
  SampleOut OutOf(const shm::SlotView& view, uint32_t i) const;
  // Samples a reader task takes in a row: 1, or for typed arrays enough
  // rows for about 64 KiB (at most 256).
  uint32_t SamplesPerTask() const;
  // Writes the sample's label into every label field.
  void WriteLabels(const SampleOut& out, int32_t label) const;

  // Constant after construction.
  const uint64_t id_;
  const v1::SessionSpec spec_;
  const uint32_t client_pid_;
  const std::shared_ptr<const Dataset> dataset_;
  const std::unique_ptr<BatchOrder> order_;  // Next() is the producer's.
  const std::unique_ptr<shm::RingProducer> ring_;
  const std::unique_ptr<shm::SlabMemory> slab_memory_;  // Outlives slabs_.
  const std::unique_ptr<shm::SlabRingWriter> slabs_;    // Null without slabs.
  const PipelineContext ctx_;
  const absl::Time created_;
  const Pipeline pipeline_;
  const std::vector<uint64_t> field_bytes_;  // Per sample, the ring's.
  const std::unique_ptr<PixelKeeper> keeper_;  // What the pixel cache keeps.
  const SampleReader reader_;
  const SampleRenderer renderer_;
  OrderQualityReport order_quality_;  // The producer's, for Stats().
  SampleErrorLog errors_;              // Its failed samples' log lines.

  std::atomic<bool> stopping_{false};  // relaxed: a hint polled by tasks.
  // Stop() has begun, or the daemon's stop has cancelled the dataset's
  // reads (before it stops each session): what fails now is not counted,
  // and no batch is published.
  bool Ending() const {
    return stopping_.load(std::memory_order_relaxed) ||
           (dataset_->reads_cancel != nullptr && dataset_->reads_cancel->cancelled());
  }
  std::atomic<uint64_t> published_{0};
  std::atomic<uint64_t> decoded_{0};
  std::atomic<uint64_t> failed_{0};
  std::atomic<uint64_t> spilled_{0};  // Decoded on another node's pool.
  std::atomic<uint64_t> client_decoded_{0};  // Handed to the client.
  std::atomic<uint64_t> work_ns_{0};

  mutable absl::Mutex mu_;
  std::thread producer_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t tasks_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);  // Why the producer stopped.
};

}  // namespace stoker

#endif  // STOKER_SERVER_SERVE_SESSION_H_
