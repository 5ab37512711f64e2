#include "server/serve/session.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/schema.h"
#include "proto/spec_util.h"
#include "server/dataset/array_source.h"
#include "server/pool/topology.h"
#include "shm/cuda_slabs.h"
#include "shm/futex.h"
#include "server/imaging/transform.h"
#include "util/log.h"
#include "util/rng.h"
#include "util/status_macros.h"

namespace stoker {

namespace {

// The pipeline's fields and the pixel cache against what the dataset holds.
absl::Status CheckSource(const v1::SessionSpec& spec, const Pipeline& p, const Dataset& ds) {
  const ArraySource* arrays = ds.source->arrays();
  if (spec.pixel_cache().max_side() != 0 && arrays != nullptr)
    return absl::InvalidArgumentError(absl::StrCat(
        "pixel_cache keeps decoded pictures: it applies to image and mask files, not to ",
        ds.description, ", which holds arrays"));
  if (p.has_spatial() && arrays != nullptr)
    return absl::InvalidArgumentError(absl::StrCat(
        "image, mask and encoded fields read files, but ", ds.description,
        " holds arrays: declare array fields"));
  if (p.has_arrays() && arrays == nullptr)
    return absl::InvalidArgumentError(absl::StrCat(
        "array fields need an array source (npy, hdf5, nifti), not ", ds.description));
  if (arrays == nullptr) return absl::OkStatus();
  // A spec that no sample fits fails now; a folder's odd file (a different
  // or corrupt shape) fails when it is read, as a per-sample error.
  for (const FieldPlan& f : p.fields()) {
    if (f.kind != v1::FieldSpec::KIND_ARRAY) continue;
    // The rows of one file share one shape: sample 0 speaks for all.
    const ArraySource& a = *arrays;
    const bool one_shape = &a.shape(0) == &a.shape(a.size() - 1);
    absl::Status first = absl::FailedPreconditionError("no readable sample");
    for (size_t i = 0; i < (one_shape ? 1 : a.size()); ++i) {
      if (!a.Broken(i).ok()) continue;
      absl::Status s = p.CheckArrayShape(f, a.shape(i), a.Name(i));
      if (s.ok()) break;
      if (first.code() == absl::StatusCode::kFailedPrecondition) first = s;
      if (i + 1 == (one_shape ? 1 : a.size())) return first;
    }
  }
  return absl::OkStatus();
}

std::vector<uint64_t> FieldBytes(const shm::RingLayout& layout) {
  std::vector<uint64_t> bytes(layout.field_count);
  for (uint32_t f = 0; f < layout.field_count; ++f) bytes[f] = layout.fields[f].sample_bytes;
  return bytes;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServingSession>> ServingSession::Create(
    uint64_t id, v1::SessionSpec spec, Pipeline pipeline,
    uint32_t client_pid, std::shared_ptr<const Dataset> dataset,
    const std::string& shm_name,
    const PipelineContext& ctx,
    const std::function<absl::Status(uint64_t)>& admit) {
  STOKER_RETURN_IF_ERROR(ApplySessionDefaults(&spec));
  STOKER_RETURN_IF_ERROR(CheckSource(spec, pipeline, *dataset));
  STOKER_RETURN_IF_ERROR(pipeline.BindFiles(dataset->files_per_sample, dataset->member_files,
                                            dataset->description));
  PlanSpec ps;
  ps.batch_size = spec.batch_size();
  ps.shuffle = spec.shuffle();
  ps.seed = spec.seed();
  ps.rank = spec.rank();
  ps.world_size = spec.world_size();
  ps.drop_last = spec.drop_last();
  ps.partitions = spec.partitions();
  ps.exchange = spec.exchange();
  ps.canonical_first_epoch =
      spec.has_canonical_first_epoch() ? spec.canonical_first_epoch() : ps.world_size > 1;
  STOKER_ASSIGN_OR_RETURN(
      std::unique_ptr<BatchOrder> order,
      BatchOrder::Create(ps, dataset,
                         {spec.start_epoch(), spec.start_position(), spec.start_batch()}));
  const shm::RingGeometry g = pipeline.Geometry(
      spec.ring_slots(), spec.batch_size());
  STOKER_ASSIGN_OR_RETURN(const shm::RingLayout layout, shm::ComputeLayout(g));
  Slabs slabs;  // A second copy of the ring's fields, charged with it.
  if (spec.has_slabs()) {
    STOKER_ASSIGN_OR_RETURN(slabs.memory, shm::SlabMemoryOfKind(SlabKind(spec), SlabGpu(spec)));
  }
  if (admit) {
    const uint64_t slab = slabs.memory ? slabs.memory->Footprint(shm::SlabBytes(layout)) : 0;
    STOKER_RETURN_IF_ERROR(admit(layout.segment_bytes + layout.slot_count * slab));
  }
  STOKER_ASSIGN_OR_RETURN(
      std::unique_ptr<shm::RingProducer> ring,
      shm::RingProducer::Create(shm_name, g, id, ctx.daemon_generation));
  if (slabs.memory) {
    STOKER_ASSIGN_OR_RETURN(slabs.writer,
                            shm::SlabRingWriter::Create(slabs.memory.get(), ring->layout()));
  }
  return std::unique_ptr<ServingSession>(new ServingSession(
      id, spec, client_pid, std::move(dataset), std::move(order), std::move(pipeline),
      std::move(ring), std::move(slabs), ctx));
}

ServingSession::ServingSession(uint64_t id, const v1::SessionSpec& spec,
                               uint32_t client_pid,
                               std::shared_ptr<const Dataset> dataset,
                               std::unique_ptr<BatchOrder> order, Pipeline pipeline,
                               std::unique_ptr<shm::RingProducer> ring, Slabs slabs,
                               const PipelineContext& ctx)
    : id_(id),
      spec_(spec),
      client_pid_(client_pid),
      dataset_(std::move(dataset)),
      order_(std::move(order)),
      ring_(std::move(ring)),
      slab_memory_(std::move(slabs.memory)),
      slabs_(std::move(slabs.writer)),
      ctx_(ctx),
      created_(absl::Now()),
      pipeline_(std::move(pipeline)),
      field_bytes_(FieldBytes(ring_->layout())),
      keeper_(PixelKeeper::ForSession(id, ctx.uid, spec_, pipeline_, *dataset_,
                                      ctx.pixel_shares, ctx.pixels, ctx.decode_limits)),
      reader_(*dataset_, pipeline_, spec_.seed(),
              static_cast<int>(spec_.pixel_cache().max_side()), field_bytes_,
              ReaderCaches{ctx.fetcher, ctx.decoded_cache, ctx.pixels, &ctx.counters->fetch,
                           ctx.decode_limits, ctx.uid, ctx.decode_room},
              keeper_.get()),
      renderer_(*dataset_, pipeline_, reader_, spec_.seed(), field_bytes_,
                reader_.decode_limits()),
      errors_(ctx.uid >= 0 ? absl::StrCat("session ", id, " (uid ", ctx.uid, ")")
                           : absl::StrCat("session ", id)) {
  ring_->SetConsumerShare(pipeline_.client_decode().share);
  ring_->SetBatchesPerEpoch(order_->batches_per_epoch());
  SetDecodeThreads(ctx_.decode_pools->pool(ctx_.node).size());
}

void ServingSession::SetDecodeThreads(double threads) {
  ring_->SetDecodeThreads(
      static_cast<uint32_t>(std::max<long>(1, std::lround(threads))));
}

ServingSession::~ServingSession() { Stop(shm::kClosedBySession); }

void ServingSession::Start() {
  absl::MutexLock lock(&mu_);
  if (stopped_ || producer_.joinable()) return;
  producer_ = std::thread([this] {
    if (!RunLoggingExceptions(absl::StrCat("session ", id_, " producer"), [&] { Produce(); })) {
      ring_->Close(shm::kClosedByError);
    }
  });
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
  // Its object reads end now (a store that drips would hold their reader
  // threads, and this Stop, until their deadline).
  if (dataset_->reads_cancel != nullptr) dataset_->reads_cancel->Cancel();
  if (producer.joinable()) producer.join();
  // What is queued would wait for turns (and its user's cap) to do nothing.
  for (auto& task : ctx_.reader_pool->TakeQueued(id_)) task();
  for (auto& task : ctx_.decode_pools->TakeQueued(id_)) task();
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](uint64_t* n) { return *n == 0; }, &tasks_in_flight_));
  }
  ring_->Close(reason);
}

namespace {
// How many rows ahead a run of rows asks for their entries.
constexpr uint32_t kPrefetchAhead = 8;
}  // namespace

void ServingSession::Produce() {
  const uint32_t batch_size = spec_.batch_size();
  auto stop = [this] { return stopping_.load(std::memory_order_relaxed); };
  BatchOrder::Batch next;
  for (uint64_t seq = 0; !stop(); ++seq) {
    if (absl::Status s = order_->Next(stop, &next); !s.ok()) {
      if (s.code() != absl::StatusCode::kCancelled || !stop()) {
        PublishOpening();  // kOpeningFailed, where it is the opening's error.
        Fail(s);
      }
      break;
    }
    PublishOpening();
    // No free slot for a while: the trainer is busy with its step, and
    // this thread may do work nobody waits for (ctx_.idle) meanwhile. A
    // streamed opening's end is published meanwhile too: a trainer may be
    // waiting for the epoch's size, not taking batches.
    const int slot = ring_->Claim(
        [this, &stop] {
          if (dataset_->streamed() && ring_->BatchesPerEpoch() == 0) {
            order_->Poll();
            PublishOpening();
          }
          return stop();
        },
        ctx_.idle == nullptr ? std::function<bool()>() : [this] { return ctx_.idle->RunOne(); });
    if (slot < 0) break;
    if (slabs_ != nullptr) {  // The trainer is done with the slot's slab too.
      if (absl::Status s = slabs_->AwaitWritable(slot, absl::InfiniteFuture(), &stopping_);
          !s.ok()) {
        if (!stop()) Fail(s);
        break;
      }
    }
    const uint64_t epoch = next.epoch;
    auto job = std::make_shared<BatchJob>();
    job->slot = slot;
    job->sequence = seq;
    job->epoch = epoch;
    job->batch_index = next.index;
    if (next.index == 0 || seq == 0) {  // An epoch begins.
      reader_.remote_reads().Begin(epoch);
      order_quality_.Measure(*order_, epoch);
    }
    if (seq == 0 && dataset_->read_ahead_requests > 0) {  // What opening read for it.
      reader_.remote_reads().Add(epoch, dataset_->read_ahead_bytes,
                                 dataset_->read_ahead_requests);
    }
    job->count = static_cast<uint32_t>(next.samples.size());
    job->remaining.store(job->count, std::memory_order_relaxed);
    job->cpu_samples = job->count;
    if (pipeline_.client_decode().on) {
      const uint32_t share = ring_->ConsumerShare();
      job->cpu_samples = static_cast<uint32_t>(
          (uint64_t{share} * job->count + shm::kShareOne / 2) / shm::kShareOne);
    }
    shm::SlotView view = ring_->Slot(slot);
    for (uint32_t i = job->count; i < batch_size; ++i) {
      WriteLabels(OutOf(*job, i), -1);  // Unused tail.
      view.status[i] = shm::kSampleOk;
      view.indices[i] = UINT64_MAX;
    }
    // A task per sample, or per run of samples when they are array rows
    // too small to be worth a task each (SamplesPerTask).
    const uint32_t run = SamplesPerTask();
    for (uint32_t i = 0; i < job->count; i += run) {
      const uint32_t end = std::min(job->count, i + run);
      Hand(-1, end - i + 1,  // Its samples and itself.
           [this, job, i, indices = std::vector<uint64_t>(next.samples.begin() + i,
                                                          next.samples.begin() + end)] {
             ReadRun(job, i, indices);
           });
    }
  }
}

void ServingSession::PublishOpening() {
  if (!dataset_->streamed() || ring_->BatchesPerEpoch() != 0) return;
  if (order_->batches_per_epoch() != 0) {
    // In the header before any batch past the first windows is published.
    ring_->SetBatchesPerEpoch(order_->batches_per_epoch());
    // The rest of what the opening read, the first epoch's.
    const auto [requests, bytes] = dataset_->OpeningReads();
    reader_.remote_reads().Add(0, bytes - std::min(bytes, dataset_->read_ahead_bytes),
                               requests - std::min(requests, dataset_->read_ahead_requests));
  } else if (!order_->failed().ok()) {
    {
      absl::MutexLock lock(&mu_);
      failure_ = order_->failed();
    }
    ring_->SetBatchesPerEpoch(shm::kOpeningFailed);
  }
}

int ServingSession::Hand(int node, uint64_t tasks, std::function<void()> task) {
  {
    absl::MutexLock lock(&mu_);
    tasks_in_flight_ += tasks;
    if (!stopped_ && node < 0) {
      ctx_.reader_pool->Schedule(std::move(task), id_, Weight(), ctx_.uid);
      return node;
    }
    if (!stopped_) {
      return ctx_.decode_pools->Schedule(node, std::move(task), id_, Weight(), ctx_.uid);
    }
  }
  task();  // Stopped (Stop took back the queues): it only counts itself done.
  return node;
}

void ServingSession::Fail(const absl::Status& s) {
  LogError(absl::StrCat("session ", id_, ": ", s.ToString()));
  absl::MutexLock lock(&mu_);
  failure_ = s;
  // The batches begun are published first: a client reads them, then the error.
  mu_.Await(absl::Condition(+[](uint64_t* n) { return *n == 0; }, &tasks_in_flight_));
  ring_->Close(shm::kClosedByError);
}

uint32_t ServingSession::SamplesPerTask() const {
  if (dataset_->source == nullptr || dataset_->source->arrays() == nullptr) return 1;
  uint64_t bytes = 1;
  for (uint64_t b : field_bytes_) bytes += b;
  // About 64 KiB of rows a task: a task costs about as much as copying
  // a few KiB, so rows of features go in runs, volume patches one each.
  return static_cast<uint32_t>(std::clamp<uint64_t>((64 << 10) / bytes, 1, 256));
}

SampleOut ServingSession::OutOf(const BatchJob& job, uint32_t i) const {
  return OutOf(ring_->Slot(job.slot), i);
}

SampleOut ServingSession::OutOf(const shm::SlotView& view, uint32_t i) const {
  SampleOut out;
  for (size_t f = 0; f < field_bytes_.size(); ++f) out.field[f] = view.fields[f] + i * field_bytes_[f];
  return out;
}

void ServingSession::ReadRun(const std::shared_ptr<BatchJob>& job, uint32_t i,
                             const std::vector<uint64_t>& indices) {
  RunTally run;
  const shm::SlotView view = ring_->Slot(job->slot);
  const uint32_t n = static_cast<uint32_t>(indices.size());
  for (uint32_t k = 0; k < n;) {
    const size_t rows = stopping_.load(std::memory_order_relaxed)
                            ? 0
                            : reader_.ReadRows(&indices[k], n - k, OutOf(view, i + k));
    if (rows > 0) {
      RowsRead(view, i + k, &indices[k], rows);
      run.finished += rows;
      run.decoded += rows;
      k += rows;
      continue;
    }
    // Rows are drawn at random: ask for a later row's entry (its label)
    // now, so its cache miss overlaps this row's read.
    if (k + kPrefetchAhead < n) __builtin_prefetch(&dataset_->sample(indices[k + kPrefetchAhead]));
    FetchSampleGuarded(job, SampleTask{i + k, indices[k], indices[k], 0}, &run);
    ++k;
  }
  run.tasks = 1;
  Done(job, run);
}

void ServingSession::RowsRead(const shm::SlotView& view, uint32_t i, const uint64_t* indices,
                              size_t n) const {
  const Dataset& ds = *dataset_;
  for (size_t k = 0; k < n; ++k) {
    if (k + kPrefetchAhead < n) __builtin_prefetch(&ds.sample(indices[k + kPrefetchAhead]));
    WriteLabels(OutOf(view, i + k), ds.sample(indices[k]).label);
    view.indices[i + k] = indices[k];
    view.status[i + k] = shm::kSampleOk;
  }
}

void ServingSession::WriteLabels(const SampleOut& out, int32_t label) const {
  for (size_t f = 0; f < pipeline_.fields().size(); ++f) {
    if (pipeline_.fields()[f].kind != v1::FieldSpec::KIND_LABEL) continue;
    if (pipeline_.fields()[f].dtype == shm::kDTypeInt64) {
      const int64_t v = label;
      std::memcpy(out.field[f], &v, 8);
    } else {
      std::memcpy(out.field[f], &label, 4);
    }
  }
}

void ServingSession::FetchSampleGuarded(const std::shared_ptr<BatchJob>& job,
                                        const SampleTask& t, RunTally* run) {
  absl::Status s = Guarded("reading a sample", [&] {
    FetchSample(job, t, run);
    return absl::OkStatus();
  });
  if (!s.ok()) FinishSample(job, t, shm::kSampleReadError, s, run);
}

void ServingSession::FetchSample(const std::shared_ptr<BatchJob>& job,
                                 const SampleTask& t, RunTally* run) {
  if (Ending()) {
    FinishSample(job, t, shm::kSampleOk, absl::OkStatus(), run);
    return;
  }
  FetchedSample in;
  SampleReader::Result r = reader_.Read(t.index, job->epoch, OutOf(*job, t.i), &in);
  switch (r.kind) {
    case SampleReader::Result::kDone:
      FinishSample(job, t, shm::kSampleOk, absl::OkStatus(), run);
      return;
    case SampleReader::Result::kReadError:
      FinishSample(job, t, shm::kSampleReadError, r.error, run);
      return;
    case SampleReader::Result::kDecodeError:
      FinishSample(job, t, shm::kSampleDecodeError, r.error, run);
      return;
    case SampleReader::Result::kDecode:
      break;
  }
  const int node = Hand(ctx_.node, 0, [this, job, t, in = std::move(in)] {
    // A throw from the decode stage is that sample's error, never the
    // process's end (or a batch that never completes).
    absl::Status s = Guarded("decoding a sample", [&] {
      DecodeSample(job, t, in);
      return absl::OkStatus();
    });
    if (!s.ok()) FinishSample(job, t, shm::kSampleDecodeError, s);
  });
  if (node != ctx_.node) spilled_.fetch_add(1, std::memory_order_relaxed);
}

void ServingSession::DecodeSample(const std::shared_ptr<BatchJob>& job,
                                  const SampleTask& t, const FetchedSample& in) {
  if (stopping_.load(std::memory_order_relaxed)) {
    FinishSample(job, t, shm::kSampleOk, absl::OkStatus());
    return;
  }
  // A sample kept in the decoded cache is rendered privately, then copied
  // into the slot: what is in the slot is never read back (the client may
  // have written there).
  std::shared_ptr<std::string> value;
  if (reader_.KeepsDecoded()) value = std::make_shared<std::string>(reader_.DecodedBytes(), '\0');
  const SampleOut out = OutOf(*job, t.i);
  RenderCost cost;
  absl::Status error = renderer_.Render(
      t.index, job->epoch, t.i >= job->cpu_samples, in, out,
      value ? reinterpret_cast<uint8_t*>(value->data()) : nullptr, &cost);
  if (!error.ok()) {
    FinishSample(job, t, shm::kSampleDecodeError, error);
    return;
  }
  ctx_.counters->decode.Observe(cost.decode_ns);
  ctx_.counters->transform.Observe(cost.write_ns);
  work_ns_.fetch_add(cost.decode_ns + cost.write_ns, std::memory_order_relaxed);
  if (cost.handed_over) {
    client_decoded_.fetch_add(1, std::memory_order_relaxed);
  } else if (pipeline_.client_decode().on) {  // The daemon's rate.
    ring_->AddDecodeCost(1, cost.decode_ns + cost.write_ns);
  }
  if (value) reader_.KeepDecoded(in, std::move(value), out);
  FinishSample(job, t, shm::kSampleOk, absl::OkStatus());
}

uint64_t ServingSession::ReplacementFor(const BatchJob& job,
                                        const SampleTask& t) const {
  const auto [first, n] = order_->ReplacementRange(job.epoch, t.original);
  const uint64_t pick =
      first + MixSeed({spec_.seed(), job.epoch, t.original, uint64_t(t.attempt) + 1,
                       0x7e91ace}) % (n - 1);
  return pick >= t.original ? pick + 1 : pick;  // Never the failed one.
}

void ServingSession::FinishSample(const std::shared_ptr<BatchJob>& job,
                                  const SampleTask& t, shm::SampleStatus status,
                                  const absl::Status& error, RunTally* run) {
  const uint32_t i = t.i;
  RunTally one;
  RunTally& tally = run != nullptr ? *run : one;
  if (!Ending()) {
    const Sample& sample = dataset_->sample(t.index);
    shm::SlotView view = ring_->Slot(job->slot);
    if (status != shm::kSampleOk) {
      failed_.fetch_add(1, std::memory_order_relaxed);
      (status == shm::kSampleReadError ? ctx_.counters->samples_failed_read
                                       : ctx_.counters->samples_failed_decode)
          .fetch_add(1, std::memory_order_relaxed);
      errors_.Report(sample.path, error);
      if (spec_.on_error() == v1::ON_ERROR_REPLACE &&
          t.attempt < kMaxReplacements &&
          order_->ReplacementRange(job->epoch, t.original).second > 1) {
        // Another deterministic sample stands in; the batch waits for it.
        SampleTask next{i, 0, t.original, t.attempt + 1};
        next.index = ReplacementFor(*job, t);
        Hand(-1, 1, [this, job, next] {
          RunTally replaced;
          FetchSampleGuarded(job, next, &replaced);
          replaced.tasks = 1;
          Done(job, replaced);
        });
        return;
      }
    }
    const SampleOut out = OutOf(*job, i);
    WriteLabels(out, sample.label);
    view.indices[i] = t.original;
    if (status == shm::kSampleOk) {
      view.status[i] = t.index == t.original ? shm::kSampleOk : shm::kSampleReplaced;
      ++tally.decoded;
    } else {
      view.status[i] = status;
      for (size_t f = 0; f < pipeline_.fields().size(); ++f) {
        if (pipeline_.fields()[f].kind == v1::FieldSpec::KIND_LABEL) continue;
        std::memset(out.field[f], 0, field_bytes_[f]);
      }
    }
    if (view.status[i] != shm::kSampleOk) {
      job->errors.fetch_add(1, std::memory_order_relaxed);
    }
  }
  ++tally.finished;
  if (run == nullptr) Done(job, one);
}

void ServingSession::Done(const std::shared_ptr<BatchJob>& job, const RunTally& run) {
  if (run.finished + run.tasks == 0) return;
  if (run.decoded > 0) {
    decoded_.fetch_add(run.decoded, std::memory_order_relaxed);
    ctx_.counters->samples_decoded.fetch_add(run.decoded, std::memory_order_relaxed);
  }
  // acq_rel: the last sample sees every other sample's writes to the slot
  // before publishing it.
  if (run.finished > 0 &&
      job->remaining.fetch_sub(run.finished, std::memory_order_acq_rel) == run.finished &&
      !Ending()) {
    const absl::Status copied = slabs_ == nullptr
                                    ? absl::OkStatus()
                                    : slabs_->Deliver(job->slot, ring_->Slot(job->slot));
    if (copied.ok()) {
      // Counted first, so a consumer that sees the batch also sees the count.
      published_.fetch_add(1, std::memory_order_relaxed);
      ctx_.counters->batches_published.fetch_add(1, std::memory_order_relaxed);
      ring_->Publish(job->slot, job->sequence, job->epoch, job->batch_index,
                     job->count, job->errors.load(std::memory_order_relaxed));
    } else {  // Its slab's copy failed: the batches before it stand.
      LogError(absl::StrCat("session ", id_, ": ", copied.ToString()));
      stopping_.store(true, std::memory_order_relaxed);
      absl::MutexLock lock(&mu_);
      failure_ = copied;
      ring_->Close(shm::kClosedByError);
    }
  }
  absl::MutexLock lock(&mu_);
  tasks_in_flight_ -= run.finished + run.tasks;
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
  s.set_numa_node(ctx_.node);
  s.set_samples_spilled(spilled_.load(std::memory_order_relaxed));
  s.set_ring_memory_node(MemoryNodeOf(ring_->Slot(0).fields[0]));
  if (pipeline_.client_decode().on) {
    s.set_samples_client_decoded(client_decoded_.load(std::memory_order_relaxed));
    s.set_cpu_share(double(ring_->ConsumerShare()) / shm::kShareOne);
  }
  if (dataset_->source != nullptr && dataset_->source->remote()) {
    const EpochTally::Counts total = reader_.remote_reads().total();
    s.set_remote_requests(total.requests);
    s.set_remote_bytes(total.bytes);
    for (const EpochTally::Counts& e : reader_.remote_reads().epochs()) {
      v1::EpochRemote* r = s.add_remote_by_epoch();
      r->set_epoch(e.epoch);
      r->set_requests(e.requests);
      r->set_bytes(e.bytes);
    }
  }
  if (const std::optional<OrderQuality> q = order_quality_.Last(); q.has_value()) {
    v1::EpochOrder* o = s.mutable_order();
    o->set_epoch(q->epoch);
    o->set_partitions(q->partitions);
    o->set_global_step(q->step);
    o->set_partitions_per_step(q->partitions_per_step);
    o->set_spread(q->spread);
    o->set_exchanged(q->exchanged);
    o->set_exchange_by_bytes(q->by_bytes);
    o->set_exchange_over_budget(q->over_budget);
  }
  keeper_->Stats(&s);
  absl::MutexLock lock(&mu_);
  s.set_failure_code(static_cast<int32_t>(failure_.code()));
  s.set_failure(std::string(failure_.message()));
  return s;
}

}  // namespace stoker
