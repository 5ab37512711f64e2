#include "server/session.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/jpeg.h"
#include "shm/futex.h"
#include "server/transform.h"
#include "util/log.h"
#include "util/rng.h"
#include "util/status_macros.h"

namespace stoker {

void SampleErrorLog::Report(const std::string& path,
                            const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (!seen_.insert(path).second) return;
  }
  LogWarning(absl::StrCat("sample failed (delivered as zeros, counted): ",
                          path, ": ", status.message()));
}

std::string Diagnose(double ring_fill, double wait_fraction, double decode_busy,
                     double share, int active_sessions) {
  if (ring_fill >= 0.75) return "consumer-bound";
  if (decode_busy >= 0.8) {
    return active_sessions > 1 && share < 0.8 / active_sessions
               ? "starved-by-fair-share"
               : "decode-bound";
  }
  // Decode has spare capacity, yet the client waits: data is not arriving.
  if (wait_fraction >= 0.05) return "read-bound";
  return "balanced";
}

absl::Status ValidateDatasetSpec(const v1::DatasetSpec& ds) {
  if (ds.kind() != v1::DatasetSpec::FOLDER &&
      ds.kind() != v1::DatasetSpec::LIST && ds.kind() != v1::DatasetSpec::LMDB)
    return absl::InvalidArgumentError("dataset.kind must be FOLDER, LIST or LMDB");
  if (ds.path().empty()) return absl::InvalidArgumentError("dataset.path is empty");
  return absl::OkStatus();
}

absl::Status ValidateSessionSpec(const v1::SessionSpec& spec) {
  auto bad = [](const std::string& msg) {
    return absl::InvalidArgumentError(msg);
  };
  const v1::DatasetSpec& ds = spec.dataset();
  STOKER_RETURN_IF_ERROR(ValidateDatasetSpec(ds));
  if (spec.batch_size() == 0 || spec.batch_size() > 65536)
    return bad(absl::StrCat("batch_size ", spec.batch_size(),
                            " must be in 1..65536"));
  if (spec.transform() != v1::VAL && spec.transform() != v1::TRAIN)
    return bad("transform must be VAL or TRAIN");
  if (!v1::OnError_IsValid(spec.on_error()))
    return bad(absl::StrCat("on_error ", spec.on_error(),
                            " must be ON_ERROR_REPLACE, ON_ERROR_RAISE or "
                            "ON_ERROR_ZEROS"));
  if (spec.image_size() == 0 || spec.image_size() > 4096)
    return bad(absl::StrCat("image_size ", spec.image_size(),
                            " must be in 1..4096"));
  const uint32_t world = std::max<uint32_t>(spec.world_size(), 1);
  if (spec.rank() >= world)
    return bad(absl::StrCat("rank ", spec.rank(),
                            " must be less than world_size ", world));
  if ((spec.mean_size() != 0 && spec.mean_size() != 3) ||
      (spec.std_size() != 0 && spec.std_size() != 3))
    return bad("mean and std must each have 3 values (or none for ImageNet's)");
  for (float s : spec.std()) {
    if (!(s > 0)) return bad(absl::StrCat("std values must be > 0, got ", s));
  }
  if (spec.ring_slots() > shm::kMaxRingSlots)
    return bad(absl::StrCat("ring_slots ", spec.ring_slots(),
                            " must be at most ", shm::kMaxRingSlots));
  if (spec.ring_slots() == 1)
    return bad("ring_slots 1 leaves no slot to fill while the client holds "
               "its batch: use 2..256 (0: the default, 4)");
  return absl::OkStatus();
}

struct ServingSession::BatchJob {
  int slot;
  uint64_t sequence;
  uint64_t epoch;
  uint64_t batch_index;
  uint32_t count;
  std::atomic<uint32_t> remaining;
  std::atomic<uint32_t> errors{0};
};

absl::StatusOr<std::unique_ptr<ServingSession>> ServingSession::Create(
    uint64_t id, const v1::SessionSpec& spec, uint32_t client_pid,
    std::shared_ptr<const Dataset> dataset, const EpochPlan& plan,
    const std::string& shm_name, const PipelineContext& ctx) {
  shm::RingGeometry g;
  g.slots = spec.ring_slots() == 0 ? 4 : spec.ring_slots();
  g.batch_size = spec.batch_size();
  g.height = g.width = spec.image_size();
  g.channels = 3;
  g.dtype = spec.dtype() == v1::FLOAT32   ? shm::kDTypeFloat32
            : spec.dtype() == v1::FLOAT16 ? shm::kDTypeFloat16
                                          : shm::kDTypeUint8;
  STOKER_ASSIGN_OR_RETURN(
      std::unique_ptr<shm::RingProducer> ring,
      shm::RingProducer::Create(shm_name, g, id, ctx.daemon_generation));
  return std::unique_ptr<ServingSession>(new ServingSession(id, spec, client_pid,
                                              std::move(dataset), plan,
                                              std::move(ring), ctx));
}

ServingSession::ServingSession(uint64_t id, const v1::SessionSpec& spec, uint32_t client_pid,
                 std::shared_ptr<const Dataset> dataset, const EpochPlan& plan,
                 std::unique_ptr<shm::RingProducer> ring,
                 const PipelineContext& ctx)
    : id_(id),
      spec_(spec),
      client_pid_(client_pid),
      dataset_(std::move(dataset)),
      plan_(plan),
      ring_(std::move(ring)),
      ctx_(ctx),
      created_(absl::Now()),
      norm_([&spec] {
        const float mean[3] = {0.485f, 0.456f, 0.406f};
        const float std[3] = {0.229f, 0.224f, 0.225f};
        Normalization n;
        for (int c = 0; c < 3; ++c) {
          const float m = spec.mean_size() == 3 ? spec.mean(c) : mean[c];
          const float s = spec.std_size() == 3 ? spec.std(c) : std[c];
          n.scale[c] = 1.0f / (255.0f * s);
          n.offset[c] = -m / s;
        }
        return n;
      }()),
      decoded_key_prefix_(absl::StrCat(
          dataset_->description, "|val", spec.image_size(), "|", spec.decode(),
          "|", spec.dtype(), "|", norm_.scale[0], ",", norm_.scale[1], ",",
          norm_.scale[2], "|", norm_.offset[0], ",", norm_.offset[1], ",",
          norm_.offset[2], "|")) {}

ServingSession::~ServingSession() { Stop(shm::kClosedBySession); }

void ServingSession::Start() {
  absl::MutexLock lock(&mu_);
  if (stopped_ || producer_.joinable()) return;
  producer_ = std::thread([this] { Produce(); });
}

void ServingSession::Stop(shm::CloseReason reason) {
  std::thread producer;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    stopping_.store(true, std::memory_order_relaxed);
    producer = std::move(producer_);
  }
  if (producer.joinable()) producer.join();
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](uint64_t* n) { return *n == 0; }, &tasks_in_flight_));
  }
  ring_->Close(reason);
}

void ServingSession::Produce() {
  const uint64_t per_epoch = plan_.batches_per_epoch();
  const uint32_t batch_size = spec_.batch_size();
  uint64_t epoch = spec_.start_epoch() + spec_.start_batch() / per_epoch;
  uint64_t batch = spec_.start_batch() % per_epoch;
  std::vector<uint64_t> order = plan_.RankOrder(epoch);
  auto stop = [this] { return stopping_.load(std::memory_order_relaxed); };
  for (uint64_t seq = 0; !stop(); ++seq) {
    const int slot = ring_->Claim(stop);
    if (slot < 0) break;
    auto job = std::make_shared<BatchJob>();
    job->slot = slot;
    job->sequence = seq;
    job->epoch = epoch;
    job->batch_index = batch;
    const uint64_t first = batch * batch_size;
    job->count = static_cast<uint32_t>(
        std::min<uint64_t>(batch_size, order.size() - first));
    job->remaining.store(job->count, std::memory_order_relaxed);
    shm::SlotView view = ring_->Slot(slot);
    for (uint32_t i = job->count; i < batch_size; ++i) {
      view.labels[i] = -1;  // Unused tail of a short final batch.
      view.status[i] = shm::kSampleOk;
      view.indices[i] = UINT64_MAX;
    }
    {
      absl::MutexLock lock(&mu_);
      tasks_in_flight_ += job->count;
    }
    for (uint32_t i = 0; i < job->count; ++i) {
      const uint64_t index = order[first + i];
      ctx_.reader_pool->Schedule([this, job, t = SampleTask{i, index, index, 0}] {
        FetchSample(job, t);
      });
    }
    if (++batch == per_epoch) {
      batch = 0;
      order = plan_.RankOrder(++epoch);
    }
  }
}

uint8_t* ServingSession::SampleOut(const BatchJob& job, uint32_t i) const {
  return ring_->Slot(job.slot).data + i * ring_->layout().sample_bytes;
}

std::string ServingSession::DecodedKey(uint64_t dataset_index) const {
  return absl::StrCat(decoded_key_prefix_, dataset_index);
}

void ServingSession::FetchSample(const std::shared_ptr<BatchJob>& job,
                                 const SampleTask& t) {
  const uint32_t i = t.i;
  const uint64_t dataset_index = t.index;
  if (stopping_.load(std::memory_order_relaxed)) {
    FinishSample(job, t, shm::kSampleOk, absl::OkStatus());
    return;
  }
  const bool cacheable = spec_.transform() == v1::VAL;
  if (cacheable) {
    if (Bytes done = ctx_.decoded_cache->Lookup(DecodedKey(dataset_index))) {
      std::memcpy(SampleOut(*job, i), done->data(), done->size());
      FinishSample(job, t, shm::kSampleOk, absl::OkStatus());
      return;
    }
  }
  const uint64_t t0 = shm::MonotonicNanos();
  absl::StatusOr<Bytes> bytes =
      ctx_.fetcher->Fetch(*dataset_, dataset_->samples[dataset_index]);
  ctx_.counters->fetch.Observe(shm::MonotonicNanos() - t0);
  if (!bytes.ok()) {
    FinishSample(job, t, shm::kSampleReadError, bytes.status());
    return;
  }
  ctx_.decode_pool->Schedule([this, job, t, b = *std::move(bytes)] {
    DecodeSample(job, t, b);
  });
}

void ServingSession::DecodeSample(const std::shared_ptr<BatchJob>& job,
                                  const SampleTask& t, const Bytes& bytes) {
  const uint32_t i = t.i;
  const uint64_t dataset_index = t.index;
  if (stopping_.load(std::memory_order_relaxed)) {
    FinishSample(job, t, shm::kSampleOk, absl::OkStatus());
    return;
  }
  thread_local DecodedRegion region;
  const uint64_t t0 = shm::MonotonicNanos();
  const int size = static_cast<int>(spec_.image_size());
  const v1::Decode mode = spec_.decode();
  CropBox box;
  JpegDecoder& decoder = ThreadLocalDecoder();
  decoder.set_limits(ctx_.decode_limits);
  absl::Status error = DecodeForCrop(
      decoder, reinterpret_cast<const uint8_t*>(bytes->data()),
      bytes->size(),
      [&](int width, int height) {
        if (spec_.transform() != v1::TRAIN) return CenterCropBox(width, height, size);
        Rng rng(MixSeed({spec_.seed(), job->epoch, dataset_index}));
        return RandomResizedCropBox(width, height, rng);
      },
      size, /*scale=*/mode == v1::DECODE_AUTO || mode == v1::DECODE_SCALE_CROP,
      /*crop=*/mode != v1::DECODE_FULL, &region, &box);
  if (!error.ok()) {
    FinishSample(job, t, shm::kSampleDecodeError, error);
    return;
  }
  uint8_t* out = SampleOut(*job, i);
  const uint64_t t1 = shm::MonotonicNanos();
  const uint32_t dtype = ring_->layout().dtype;
  if (dtype == shm::kDTypeUint8) {
    ResizeBox(region.image.pixels.data(), region.image.width,
              region.image.height, box, size, size, out);
  } else {  // Resample once, then normalize into the slot as CHW floats.
    thread_local std::vector<uint8_t> hwc;
    hwc.resize(static_cast<size_t>(size) * size * 3);
    ResizeBox(region.image.pixels.data(), region.image.width,
              region.image.height, box, size, size, hwc.data());
    WriteNormalizedChw(hwc.data(), size, size, norm_,
                       dtype == shm::kDTypeFloat16, out);
  }
  ctx_.counters->decode.Observe(t1 - t0);
  ctx_.counters->transform.Observe(shm::MonotonicNanos() - t1);
  // Only when the whole epoch fits: an LRU over a larger sequential scan
  // would copy every sample in and never hit.
  const uint64_t epoch_bytes =
      dataset_->samples.size() * ring_->layout().sample_bytes;
  if (spec_.transform() == v1::VAL &&
      epoch_bytes <= ctx_.decoded_cache->capacity_bytes()) {
    ctx_.decoded_cache->Insert(
        DecodedKey(dataset_index),
        std::make_shared<const std::string>(
            reinterpret_cast<const char*>(out), ring_->layout().sample_bytes));
  }
  FinishSample(job, t, shm::kSampleOk, absl::OkStatus());
}

uint64_t ServingSession::ReplacementFor(const BatchJob& job,
                                        const SampleTask& t) const {
  const uint64_t n = dataset_->samples.size();
  const uint64_t pick =
      MixSeed({spec_.seed(), job.epoch, t.original, uint64_t(t.attempt) + 1,
               0x7e91ace}) % (n - 1);
  return pick >= t.original ? pick + 1 : pick;  // Never the failed one.
}

void ServingSession::FinishSample(const std::shared_ptr<BatchJob>& job,
                                  const SampleTask& t, shm::SampleStatus status,
                                  const absl::Status& error) {
  const uint32_t i = t.i;
  if (!stopping_.load(std::memory_order_relaxed)) {
    const Sample& sample = dataset_->samples[t.index];
    shm::SlotView view = ring_->Slot(job->slot);
    if (status != shm::kSampleOk) {
      failed_.fetch_add(1, std::memory_order_relaxed);
      (status == shm::kSampleReadError ? ctx_.counters->samples_failed_read
                                       : ctx_.counters->samples_failed_decode)
          .fetch_add(1, std::memory_order_relaxed);
      ctx_.error_log->Report(sample.path, error);
      if (spec_.on_error() == v1::ON_ERROR_REPLACE &&
          t.attempt < kMaxReplacements && dataset_->samples.size() > 1) {
        // Another deterministic sample stands in; the batch waits for it.
        SampleTask next{i, 0, t.original, t.attempt + 1};
        next.index = ReplacementFor(*job, t);
        ctx_.reader_pool->Schedule([this, job, next] { FetchSample(job, next); });
        return;
      }
    }
    view.labels[i] = sample.label;
    view.indices[i] = t.original;
    if (status == shm::kSampleOk) {
      view.status[i] = t.index == t.original ? shm::kSampleOk : shm::kSampleReplaced;
      decoded_.fetch_add(1, std::memory_order_relaxed);
      ctx_.counters->samples_decoded.fetch_add(1, std::memory_order_relaxed);
    } else {
      view.status[i] = status;
      std::memset(SampleOut(*job, i), 0, ring_->layout().sample_bytes);
    }
    if (view.status[i] != shm::kSampleOk) {
      job->errors.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // acq_rel: the last sample sees every other sample's writes to the slot
  // before publishing it.
  if (job->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1 &&
      !stopping_.load(std::memory_order_relaxed)) {
    // Counted first, so a consumer that sees the batch also sees the count.
    published_.fetch_add(1, std::memory_order_relaxed);
    ctx_.counters->batches_published.fetch_add(1, std::memory_order_relaxed);
    ring_->Publish(job->slot, job->sequence, job->epoch, job->batch_index,
                   job->count, job->errors.load(std::memory_order_relaxed));
  }
  absl::MutexLock lock(&mu_);
  --tasks_in_flight_;
}

v1::SessionStats ServingSession::Stats() const {
  v1::SessionStats s;
  s.set_session_id(id_);
  s.set_dataset(dataset_->description);
  s.set_client_pid(client_pid_);
  s.set_batches_published(published_.load(std::memory_order_relaxed));
  s.set_samples_decoded(decoded_.load(std::memory_order_relaxed));
  s.set_samples_failed(failed_.load(std::memory_order_relaxed));
  s.set_ring_slots(ring_->layout().slot_count);
  s.set_ring_ready(ring_->FilledSlots());
  s.set_uptime_seconds(absl::ToDoubleSeconds(absl::Now() - created_));
  return s;
}

}  // namespace stoker
