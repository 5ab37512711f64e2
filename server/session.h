// One trainer's session: its spec, its sample plan and its ring, and the
// producer thread that keeps the ring full across epoch boundaries.
//
// The producer thread claims ring slots in sequence order and schedules one
// fetch per sample on the shared reader pool (caches, then storage: I/O
// never blocks a decode thread). A fetched sample goes to the decode pool of
// the session's NUMA node (server/node_pools.h), which decodes and
// transforms it straight into the slot; a val sample found in the
// decoded-output cache is copied in by the reader. With a pixel cache
// (spec.pixel_cache) the reader looks up the sample's kept pictures first
// and fetches encoded bytes only for the ones missing. With client decode
// (spec.client_decode) the first samples of each batch (the share the ring
// header holds as the batch starts) are decoded as usual, and of the rest
// every JPEG the client can decode is handed over: only its header is read,
// and its bytes and render record are written instead of pixels. The
// task that finishes a batch publishes the slot. Batches therefore appear in
// plan order whatever order samples finish in, and their bytes depend only
// on the spec.
//
// Thread-safety: Start/Stop/stats may be called from any thread. Stop() is
// idempotent and returns only after the producer thread has exited and
// every scheduled sample task has finished, so destroying a stopped ServingSession
// is safe. The destructor stops the session and removes its ring.
#ifndef STOKER_SERVER_SESSION_H_
#define STOKER_SERVER_SESSION_H_

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
#include "server/jpeg.h"
#include "proto/stoker.pb.h"
#include "server/cache.h"
#include "server/dataset.h"
#include "server/fetcher.h"
#include "server/histogram.h"
#include "server/node_pools.h"
#include "server/pixel_cache.h"
#include "server/pipeline.h"
#include "server/plan.h"
#include "server/thread_pool.h"
#include "server/transform.h"
#include "shm/ring.h"

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

// Logs a failed sample once per path for the daemon's lifetime, so a bad
// file read every epoch does not flood the log. Thread-safe.
class SampleErrorLog {
 public:
  void Report(const std::string& path, const absl::Status& status);

 private:
  absl::Mutex mu_;
  absl::flat_hash_set<std::string> seen_ ABSL_GUARDED_BY(mu_);
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
  SampleErrorLog* error_log;
  uint64_t daemon_generation;
  DecodeLimits decode_limits;
};

class ServingSession {
 public:
  // Creates the ring (RESOURCE_EXHAUSTED when /dev/shm is full) for a
  // spec CheckSessionSpec accepted, running the `pipeline` it compiled,
  // over `dataset`; INVALID_ARGUMENT when the pipeline reads
  // more files per sample than the dataset has. `admit` (may be null) is
  // asked with the ring's size before anything is allocated; its error is
  // returned. Call Start() to begin filling it.
  static absl::StatusOr<std::unique_ptr<ServingSession>> Create(
      uint64_t id, const v1::SessionSpec& spec, Pipeline pipeline,
      uint32_t client_pid, std::shared_ptr<const Dataset> dataset, const EpochPlan& plan,
      const std::string& shm_name, const PipelineContext& ctx,
      const std::function<absl::Status(uint64_t ring_bytes)>& admit = nullptr);
  ~ServingSession();

  void Start();
  void Stop(shm::CloseReason reason);

  // Refreshes the ring's producer heartbeat (the daemon's reaper calls it).
  void Heartbeat() { ring_->Heartbeat(); }

  uint64_t id() const { return id_; }
  uint32_t client_pid() const { return client_pid_; }
  const EpochPlan& plan() const { return plan_; }
  const v1::SessionSpec& spec() const { return spec_; }
  const Pipeline& pipeline() const { return pipeline_; }
  // The session's share weight in the pools (its spec's priority, >= 1).
  int Weight() const { return std::max<int>(1, spec_.priority()); }
  const Dataset& dataset() const { return *dataset_; }
  std::shared_ptr<const Dataset> shared_dataset() const { return dataset_; }
  const shm::RingProducer& ring() const { return *ring_; }
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
  uint64_t read_ns() const { return read_ns_.load(std::memory_order_relaxed); }
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

  ServingSession(uint64_t id, const v1::SessionSpec& spec, uint32_t client_pid,
          std::shared_ptr<const Dataset> dataset, const EpochPlan& plan,
          Pipeline pipeline, std::unique_ptr<shm::RingProducer> ring,
          const PipelineContext& ctx);
  void Produce();
  // The dataset sample that stands in for failed `t` (never t.original).
  uint64_t ReplacementFor(const BatchJob& job, const SampleTask& t) const;
  static constexpr int kMaxReplacements = 8;
  // Reader stage: the decoded cache, else the encoded bytes of the
  // sample's files from the fetcher, handed to DecodeSample on the decode
  // pool.
  // What the reader stage hands the decode stage: the encoded files, and
  // with a pixel cache each spatial field's cached picture (or, on a miss,
  // its key and its file's version for the fill).
  struct CachedPicture {
    Bytes entry;  // Null on a miss.
    std::string key;
    FileVersion version;
    bool versioned = false;  // L2 applies: the fill is queued there too.
  };
  struct Fetched {
    std::string decoded_key;  // Cacheable pipelines: the decoded cache's key.
    std::vector<Bytes> files;
    std::vector<CachedPicture> pictures;  // Per field (spatial ones used).
  };
  // FetchSample behind the exception barrier: a throw is the sample's error.
  void FetchSampleGuarded(const std::shared_ptr<BatchJob>& job, const SampleTask& t);
  void FetchSample(const std::shared_ptr<BatchJob>& job, const SampleTask& t);
  // Pixel-cache lookups for every spatial field, its file as `ids` (the
  // sample's files, identified) names it; true when all hit.
  bool LookupPixels(const std::vector<SourceKey>& ids, Fetched* in);
  void DecodeSample(const std::shared_ptr<BatchJob>& job, const SampleTask& t,
                    const Fetched& in);
  // Copies every array field of one sample (its region) into the slot.
  absl::Status ReadArrays(const BatchJob& job, const SampleTask& t);
  // Decodes and writes every image/mask field of one sample; the error
  // names the file. With `spatial_out`, the image/mask fields are written
  // there, one after another, instead of into the slot (a private copy for
  // the decoded cache: the slot is the client's to scribble on).
  absl::Status RenderSample(const BatchJob& job, const SampleTask& t,
                            const Fetched& in, uint8_t* spatial_out = nullptr);
  // Copies an encoded file, count first, into `out`; DATA_LOSS when it
  // does not fit the field.
  absl::Status WriteEncoded(const FieldPlan& field, const std::string& bytes,
                            uint8_t* out) const;
  // Client decode: writes spatial field f's file and render record for the
  // client instead of decoding it, when the client can decode it (a JPEG
  // within the limits, not CMYK, no per-pixel effect drawn); false when
  // the daemon must. `plan` draws the geometry into `canvases` and
  // `effects` (false: another size than the sample's).
  absl::StatusOr<bool> HandOver(const BatchJob& job, const SampleTask& t, size_t f,
                                const Fetched& in,
                                const std::function<bool(int, int)>& plan,
                                const std::vector<Canvas>& canvases,
                                const std::vector<Effects>& effects);
  // Field f's picture: decoded for this sample into `image`, or from the
  // pixel cache (filled on a miss); `plan` as DecodeImage's.
  absl::Status Picture(const FieldPlan& field, size_t f, const Fetched& in,
                       const std::function<RegionRequest(int, int)>& plan,
                       Image* image, Bytes* entry, ImageView* view);
  // Records the sample's outcome (or, for a failure under ON_ERROR_REPLACE,
  // starts on a replacement); the batch's last sample publishes it.
  void FinishSample(const std::shared_ptr<BatchJob>& job, const SampleTask& t,
                    shm::SampleStatus status,
                    const absl::Status& error);
  uint8_t* SampleOut(const BatchJob& job, size_t field, uint32_t i) const;
  // Writes the sample's label into every label field.
  void WriteLabels(const BatchJob& job, uint32_t i, int32_t label) const;
  // Total bytes of the non-label fields of one sample (the decoded cache's
  // value).
  uint64_t DataBytes() const;
  // Ends a sample whose file `k` could not be identified or read.
  void FailRead(const std::shared_ptr<BatchJob>& job, const SampleTask& t,
                const Sample& sample, uint32_t k, const absl::Status& s);
  // Copies a decoded-cache value (the image/mask fields, one after another)
  // into sample `i` of the slot.
  void CopySpatial(const BatchJob& job, uint32_t i, const std::string& value) const;

  // Constant after construction.
  const uint64_t id_;
  const v1::SessionSpec spec_;
  const uint32_t client_pid_;
  const std::shared_ptr<const Dataset> dataset_;
  const EpochPlan plan_;
  const std::unique_ptr<shm::RingProducer> ring_;
  const PipelineContext ctx_;
  const absl::Time created_;
  const Pipeline pipeline_;
  const int max_side_;  // spec.pixel_cache.max_side; 0: no pixel cache.
  // Everything but the sample index that identifies this session's finished
  // samples in the decoded cache (built once, not per sample).
  const std::string decoded_key_prefix_;

  std::atomic<bool> stopping_{false};  // relaxed: a hint polled by tasks.
  std::atomic<uint64_t> published_{0};
  std::atomic<uint64_t> decoded_{0};
  std::atomic<uint64_t> failed_{0};
  std::atomic<uint64_t> spilled_{0};  // Decoded on another node's pool.
  std::atomic<uint64_t> client_decoded_{0};  // Handed to the client.
  std::atomic<uint64_t> read_ns_{0}, work_ns_{0};

  absl::Mutex mu_;
  std::thread producer_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t tasks_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace stoker

#endif  // STOKER_SERVER_SESSION_H_
