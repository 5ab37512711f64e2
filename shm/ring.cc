#include "shm/ring.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cctype>
#include <cstring>
#include <vector>
#include <ctime>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shm/futex.h"
#include "util/process.h"
#include "util/status_macros.h"

namespace stoker::shm {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(50);
// A producer that has not refreshed its heartbeat for this long is checked
// for death by pid; one silent for kProducerDeadAfter is given up on.
constexpr uint64_t kProducerSuspectNs = 1'000'000'000ULL;
constexpr uint64_t kProducerDeadNs = 15'000'000'000ULL;

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

const char* ReasonText(uint32_t reason) {
  switch (reason) {
    case kClosedBySession:
      return "the session was closed";
    case kClosedByShutdown:
      return "the daemon is shutting down";
    case kClosedByError:
      return "the session failed in the daemon (see its log)";
    default:
      return "unknown reason";
  }
}

SlotView SlotAt(void* base, const RingLayout& h, int index) {
  auto* slot = static_cast<uint8_t*>(base) + h.slots_offset +
               static_cast<uint64_t>(index) * h.slot_stride;
  SlotView v{reinterpret_cast<SlotControl*>(slot),
             reinterpret_cast<uint32_t*>(slot + h.status_offset),
             reinterpret_cast<uint64_t*>(slot + h.index_offset),
             {}};
  for (uint32_t f = 0; f < h.field_count && f < kMaxFields; ++f) {
    v.fields[f] = slot + h.fields[f].offset;
  }
  return v;
}

bool ValidFieldName(const std::string& name) {
  if (name.empty() || name.size() >= kFieldNameBytes) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

}  // namespace

RingGeometry ImageLabelGeometry(uint32_t slots, uint32_t batch_size,
                                uint32_t height, uint32_t width,
                                uint32_t channels, uint32_t dtype) {
  RingGeometry g;
  g.slots = slots;
  g.batch_size = batch_size;
  FieldGeometry image{"image", dtype, {height, width, channels}};
  if (dtype != kDTypeUint8) image.shape = {channels, height, width};
  g.fields = {image, FieldGeometry{"label", kDTypeInt32, {}}};
  return g;
}

int FindField(const RingLayout& layout, const char* name) {
  for (uint32_t f = 0; f < layout.field_count && f < kMaxFields; ++f) {
    if (std::strncmp(layout.fields[f].name, name, kFieldNameBytes) == 0) {
      return static_cast<int>(f);
    }
  }
  return -1;
}

absl::StatusOr<RingLayout> ComputeLayout(const RingGeometry& g) {
  auto bad = [](const char* field, uint64_t v, const char* rule) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ring %s = %d: %s", field, v, rule));
  };
  if (g.slots == 0 || g.slots > kMaxRingSlots)
    return bad("slots", g.slots, "must be in 1..256");
  if (g.batch_size == 0 || g.batch_size > kMaxRingBatch)
    return bad("batch_size", g.batch_size, absl::StrCat("must be in 1..", kMaxRingBatch).c_str());
  if (g.fields.empty() || g.fields.size() > kMaxFields)
    return bad("field count", g.fields.size(), "must be in 1..16");
  RingLayout h{};
  h.magic = kRingMagic;
  h.layout_version = kLayoutVersion;
  h.header_bytes = kHeaderBytes;
  h.slot_count = g.slots;
  h.batch_size = g.batch_size;
  h.field_count = static_cast<uint32_t>(g.fields.size());
  h.status_offset = sizeof(SlotControl);
  h.index_offset = AlignUp(h.status_offset + 4ULL * g.batch_size, 64);
  uint64_t end = h.index_offset + 8ULL * g.batch_size;
  for (size_t f = 0; f < g.fields.size(); ++f) {
    const FieldGeometry& fg = g.fields[f];
    auto bad_field = [&](const std::string& rule) {
      return absl::InvalidArgumentError(
          absl::StrCat("ring field '", fg.name, "': ", rule));
    };
    if (!ValidFieldName(fg.name))
      return bad_field("a name is 1..31 of [A-Za-z0-9_]");
    for (size_t e = 0; e < f; ++e) {
      if (g.fields[e].name == fg.name) return bad_field("named twice");
    }
    if (DTypeBytes(fg.dtype) == 0)
      return bad_field(absl::StrCat("unknown dtype code ", fg.dtype));
    if (fg.shape.size() > kMaxFieldDims)
      return bad_field(absl::StrCat(fg.shape.size(), " dimensions; at most ",
                                    kMaxFieldDims));
    FieldLayout& fl = h.fields[f];
    std::memcpy(fl.name, fg.name.data(), fg.name.size());
    fl.dtype = fg.dtype;
    fl.ndim = static_cast<uint32_t>(fg.shape.size());
    uint64_t elements = 1;
    for (size_t d = 0; d < fg.shape.size(); ++d) {
      if (fg.shape[d] == 0 || fg.shape[d] > kMaxDimension)
        return bad_field(absl::StrCat("dimension ", d, " is ", fg.shape[d],
                                      "; must be in 1..", kMaxDimension));
      fl.shape[d] = fg.shape[d];
      elements *= fg.shape[d];
      if (elements > kMaxRingBytes) return bad_field("too many elements");
    }
    fl.sample_bytes = elements * DTypeBytes(fg.dtype);
    const uint64_t region = fl.sample_bytes * g.batch_size;
    if (region > kMaxRingBytes) return bad_field("exceeds the ring size limit");
    fl.offset = AlignUp(end, region >= kPageBytes ? kPageBytes : 64);
    end = fl.offset + region;
  }
  h.slot_stride = AlignUp(end, kPageBytes);
  h.slots_offset = kHeaderBytes;
  h.segment_bytes = h.slots_offset + h.slot_stride * g.slots;
  if (h.segment_bytes > kMaxRingBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ring of %d slots x %d bytes = %d bytes exceeds the %d byte limit; "
        "use fewer slots or a smaller batch",
        g.slots, h.slot_stride, h.segment_bytes, kMaxRingBytes));
  }
  return h;
}

// ---------------------------------------------------------------- producer

RingProducer::RingProducer(Segment segment, const RingLayout& layout)
    : segment_(std::move(segment)),
      header_(static_cast<RingHeader*>(segment_.base())),
      layout_(layout),
      created_ns_(MonotonicNanos()) {}

absl::StatusOr<std::unique_ptr<RingProducer>> RingProducer::Create(
    const std::string& label, const RingGeometry& g, uint64_t session_id,
    uint64_t daemon_generation) {
  STOKER_ASSIGN_OR_RETURN(RingLayout layout, ComputeLayout(g));
  STOKER_ASSIGN_OR_RETURN(Segment seg,
                          Segment::Create(label, layout.segment_bytes));
  // The segment is zero-filled by the kernel, so every slot starts FREE.
  // Constructing the header in place starts the atomics' lifetimes.
  auto* h = new (seg.base()) RingHeader;
  h->layout = layout;
  h->session_id = session_id;
  h->daemon_generation = daemon_generation;
  h->daemon_pid = static_cast<uint32_t>(getpid());
  h->producer_heartbeat_ns.store(MonotonicNanos(), std::memory_order_relaxed);
  for (uint32_t i = 0; i < g.slots; ++i) {
    new (SlotAt(seg.base(), h->layout, i).control) SlotControl{};
  }
  std::atomic_thread_fence(std::memory_order_release);
  return std::unique_ptr<RingProducer>(new RingProducer(std::move(seg), layout));
}

RingProducer::~RingProducer() { Close(kClosedBySession); }

int RingProducer::Claim(const std::function<bool()>& should_stop,
                        const std::function<bool()>& idle) {
  bool behind = false;
  while (true) {
    // Read the futex word before scanning, so a release that happens after
    // the scan changes it and the wait returns immediately.
    uint32_t seen = header_->released.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < layout_.slot_count; ++i) {
      SlotControl* c = Slot(i).control;
      uint32_t expected = kSlotFree;
      if (c->state.compare_exchange_strong(expected, kSlotFilling,
                                           std::memory_order_acq_rel)) {
        return static_cast<int>(i);
      }
    }
    Heartbeat();
    if (should_stop()) return -1;
    if (behind && idle && idle()) continue;
    FutexWait(&header_->released, seen, kPollInterval);
    // Nothing released during a whole wait: the consumer is behind, not
    // between batches.
    behind = header_->released.load(std::memory_order_acquire) == seen;
  }
}

SlotView RingProducer::Slot(int index) const {
  return SlotAt(segment_.base(), layout_, index);
}

void RingProducer::Publish(int index, uint64_t sequence, uint64_t epoch,
                           uint64_t batch_index, uint32_t sample_count,
                           uint32_t error_count) {
  SlotControl* c = Slot(index).control;
  c->sequence.store(sequence, std::memory_order_relaxed);
  c->epoch = epoch;
  c->batch_index = batch_index;
  c->sample_count = sample_count;
  c->error_count = error_count;
  c->state.store(kSlotReady, std::memory_order_release);
  published_count_.fetch_add(1, std::memory_order_relaxed);
  header_->published.fetch_add(1, std::memory_order_release);
  FutexWakeAll(&header_->published);
}

void RingProducer::Close(CloseReason reason) {
  uint32_t open = kOpen;
  if (header_->closed.compare_exchange_strong(open, reason,
                                              std::memory_order_acq_rel)) {
    header_->published.fetch_add(1, std::memory_order_release);
    FutexWakeAll(&header_->published);
  }
}

void RingProducer::Heartbeat() {
  header_->producer_heartbeat_ns.store(MonotonicNanos(),
                                       std::memory_order_relaxed);
}

uint32_t RingProducer::FilledSlots() const {
  uint32_t n = 0;
  for (uint32_t i = 0; i < layout_.slot_count; ++i) {
    uint32_t s = Slot(i).control->state.load(std::memory_order_relaxed);
    if (s == kSlotReady || s == kSlotHeld) ++n;
  }
  return n;
}

uint32_t RingProducer::ConsumerShare() const {
  return std::min(header_->consumer_cpu_share.load(std::memory_order_relaxed),
                  kShareOne);
}

uint64_t RingProducer::ConsumerWaitNs() const {
  return std::min(header_->consumer_wait_ns.load(std::memory_order_relaxed),
                  MonotonicNanos() - created_ns_);
}

uint64_t RingProducer::ConsumerBatches() const {
  return std::min(header_->consumer_batches.load(std::memory_order_relaxed),
                  published_count_.load(std::memory_order_relaxed));
}

void RingProducer::SetConsumerShare(uint32_t share) {
  header_->consumer_cpu_share.store(std::min(share, kShareOne),
                                    std::memory_order_relaxed);
}

void RingProducer::SetDecodeThreads(uint32_t threads) {
  header_->producer_decode_threads.store(threads, std::memory_order_relaxed);
}

void RingProducer::SetBatchesPerEpoch(uint64_t n) {
  header_->batches_per_epoch.store(n, std::memory_order_release);
}

uint64_t RingProducer::BatchesPerEpoch() const {
  return header_->batches_per_epoch.load(std::memory_order_acquire);
}

uint64_t RingConsumer::batches_per_epoch() const {
  return header_->batches_per_epoch.load(std::memory_order_acquire);
}

void RingProducer::AddDecodeCost(uint64_t samples, uint64_t ns) {
  header_->producer_cpu_samples.fetch_add(samples, std::memory_order_relaxed);
  header_->producer_cpu_ns.fetch_add(ns, std::memory_order_relaxed);
}

// ---------------------------------------------------------------- consumer

RingConsumer::RingConsumer(Segment segment, const RingLayout& layout)
    : segment_(std::move(segment)),
      header_(static_cast<RingHeader*>(segment_.base())),
      layout_(layout) {}

namespace {

// The header's layout must be exactly the one its geometry implies (every
// offset and stride), and fit the mapping: nothing a writer of the segment
// puts there can point a view outside it.
absl::Status CheckLayout(const RingLayout& got, uint64_t mapped_bytes,
                         const std::string& name) {
  RingGeometry g;
  g.slots = got.slot_count;
  g.batch_size = got.batch_size;
  for (uint32_t f = 0; f < got.field_count && f < kMaxFields; ++f) {
    const FieldLayout& fl = got.fields[f];
    FieldGeometry fg;
    fg.name.assign(fl.name, strnlen(fl.name, kFieldNameBytes));
    fg.dtype = fl.dtype;
    fg.shape.assign(fl.shape, fl.shape + std::min(fl.ndim, kMaxFieldDims + 1));
    g.fields.push_back(std::move(fg));
  }
  if (got.field_count > kMaxFields) g.fields.resize(kMaxFields + 1);
  absl::StatusOr<RingLayout> want = ComputeLayout(g);
  if (!want.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "segment ", name, " has an invalid ring geometry: ",
        want.status().message()));
  }
  std::vector<std::pair<std::string, std::pair<uint64_t, uint64_t>>> fields = {
      {"header_bytes", {got.header_bytes, want->header_bytes}},
      {"segment_bytes", {got.segment_bytes, want->segment_bytes}},
      {"slots_offset", {got.slots_offset, want->slots_offset}},
      {"slot_stride", {got.slot_stride, want->slot_stride}},
      {"status_offset", {got.status_offset, want->status_offset}},
      {"index_offset", {got.index_offset, want->index_offset}},
      {"mapped size", {mapped_bytes, want->segment_bytes}},
  };
  for (uint32_t f = 0; f < got.field_count; ++f) {
    const std::string n = absl::StrCat("field ", f);
    fields.push_back({n + " offset", {got.fields[f].offset, want->fields[f].offset}});
    fields.push_back({n + " sample_bytes",
                      {got.fields[f].sample_bytes, want->fields[f].sample_bytes}});
  }
  for (const auto& [field, values] : fields) {
    if (values.first != values.second) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "segment %s is a corrupt ring: %s is %d, its geometry implies %d",
          name, field, values.first, values.second));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RingConsumer>> RingConsumer::Open(
    int fd, const std::string& label, uint64_t session_id) {
  STOKER_ASSIGN_OR_RETURN(Segment seg, Segment::Map(fd, label));
  return Open(std::move(seg), session_id);
}

absl::StatusOr<std::unique_ptr<RingConsumer>> RingConsumer::Open(
    Segment seg, uint64_t session_id) {
  const std::string name = seg.name();
  if (seg.size() < kHeaderBytes) {
    return absl::FailedPreconditionError(
        absl::StrCat("segment ", name, " is too small to be a ring"));
  }
  const auto* h = static_cast<const RingHeader*>(seg.base());
  std::atomic_thread_fence(std::memory_order_acquire);
  if (h->layout.magic != kRingMagic ||
      h->layout.layout_version != kLayoutVersion) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "segment %s is not a layout-%d Stoker ring (magic %x, version %d)",
        name, kLayoutVersion, h->layout.magic, h->layout.layout_version));
  }
  if (h->session_id != session_id) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "segment %s belongs to session %d, expected session %d", name,
        h->session_id, session_id));
  }
  const RingLayout layout = h->layout;  // One read; then only the copy.
  STOKER_RETURN_IF_ERROR(CheckLayout(layout, seg.size(), name));
  return std::unique_ptr<RingConsumer>(new RingConsumer(std::move(seg), layout));
}

SlotView RingConsumer::Slot(int index) const {
  return SlotAt(segment_.base(), layout_, index);
}

int RingConsumer::FindReady(uint64_t sequence) const {
  for (uint32_t i = 0; i < layout_.slot_count; ++i) {
    SlotControl* c = Slot(i).control;
    if (c->state.load(std::memory_order_acquire) == kSlotReady &&
        c->sequence.load(std::memory_order_relaxed) == sequence) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

absl::Status RingConsumer::CheckProducer() const {
  uint64_t now = MonotonicNanos();
  uint64_t beat = header_->producer_heartbeat_ns.load(std::memory_order_relaxed);
  uint64_t silent = now > beat ? now - beat : 0;
  if (silent > kProducerSuspectNs) {
    pid_t pid = static_cast<pid_t>(header_->daemon_pid);
    if (ProcessGone(pid)) {
      return absl::UnavailableError(
          absl::StrFormat("the daemon (pid %d) that fills this ring exited", pid));
    }
  }
  if (silent > kProducerDeadNs) {
    return absl::UnavailableError(absl::StrFormat(
        "the daemon has not updated this ring for %.1f s", silent / 1e9));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> RingConsumer::Acquire(
    uint64_t sequence, absl::Duration timeout,
    const std::function<absl::Status()>& extra_liveness,
    SlotSnapshot* snapshot, uint64_t last_epoch) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    uint32_t seen = header_->published.load(std::memory_order_acquire);
    int index = FindReady(sequence);
    if (index >= 0) {
      SlotControl* c = Slot(index).control;
      if (c->epoch > last_epoch) {
        return absl::OutOfRangeError(absl::StrCat("batch ", sequence, " is of epoch ", c->epoch));
      }
      c->state.store(kSlotHeld, std::memory_order_release);
      held_.fetch_add(1, std::memory_order_relaxed);
      SlotSnapshot s;
      s.sample_count = c->sample_count;
      s.error_count = c->error_count;
      s.epoch = c->epoch;
      s.batch_index = c->batch_index;
      s.sequence = sequence;
      if (s.sample_count > layout_.batch_size || s.error_count > s.sample_count) {
        Release(index);
        return absl::DataLossError(absl::StrFormat(
            "ring slot %d is corrupt: %d samples (%d failed) in a batch of %d",
            index, s.sample_count, s.error_count, layout_.batch_size));
      }
      if (snapshot != nullptr) *snapshot = s;
      return index;
    }
    auto all_held = [this]() -> absl::Status {
      if (held_.load(std::memory_order_relaxed) < layout_.slot_count) return absl::OkStatus();
      return absl::FailedPreconditionError(absl::StrFormat(
          "all %d ring slots are held by the application; release a batch "
          "or open the session with more ring slots",
          layout_.slot_count));
    };
    STOKER_RETURN_IF_ERROR(WaitForPublish(seen, deadline, timeout,
                                          absl::StrCat("batch ", sequence), all_held,
                                          extra_liveness));
  }
}

absl::Status RingConsumer::WaitForPublish(uint32_t seen, absl::Time deadline,
                                          absl::Duration timeout, absl::string_view what,
                                          const std::function<absl::Status()>& check,
                                          const std::function<absl::Status()>& extra_liveness) {
  const uint32_t reason = header_->closed.load(std::memory_order_acquire);
  if (reason != kOpen) {
    return absl::UnavailableError(
        absl::StrCat("ring closed before ", what, ": ", ReasonText(reason)));
  }
  if (check) STOKER_RETURN_IF_ERROR(check());
  STOKER_RETURN_IF_ERROR(CheckProducer());
  if (extra_liveness) STOKER_RETURN_IF_ERROR(extra_liveness());
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) {
    return absl::DeadlineExceededError(
        absl::StrCat(what, " not ready after ", absl::FormatDuration(timeout)));
  }
  header_->consumer_heartbeat_ns.store(MonotonicNanos(), std::memory_order_relaxed);
  FutexWait(&header_->published, seen, std::min(left, kPollInterval));
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> RingConsumer::WaitBatchesPerEpoch(
    absl::Duration timeout, const std::function<absl::Status()>& extra_liveness) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const uint32_t seen = header_->published.load(std::memory_order_acquire);
    if (const uint64_t n = batches_per_epoch(); n == kOpeningFailed) {
      return absl::FailedPreconditionError("the dataset's opening failed");
    } else if (n != 0) {
      return n;
    }
    STOKER_RETURN_IF_ERROR(WaitForPublish(seen, deadline, timeout, "the epoch's size",
                                          nullptr, extra_liveness));
  }
}

void RingConsumer::SetCpuShare(uint32_t share) {
  header_->consumer_cpu_share.store(std::min(share, kShareOne),
                                    std::memory_order_relaxed);
}

void RingConsumer::AddWait(uint64_t ns) {
  header_->consumer_wait_ns.fetch_add(ns, std::memory_order_relaxed);
}

void RingConsumer::CountBatch() {
  header_->consumer_batches.fetch_add(1, std::memory_order_relaxed);
}

RingConsumer::ProducerRate RingConsumer::producer_rate() const {
  ProducerRate r;
  r.samples = header_->producer_cpu_samples.load(std::memory_order_relaxed);
  r.nanos = header_->producer_cpu_ns.load(std::memory_order_relaxed);
  r.threads = header_->producer_decode_threads.load(std::memory_order_relaxed);
  r.share = std::min(header_->consumer_cpu_share.load(std::memory_order_relaxed),
                     kShareOne);
  return r;
}

uint32_t RingConsumer::close_reason() const {
  return header_->closed.load(std::memory_order_acquire);
}

void RingConsumer::Release(int index) {
  Slot(index).control->state.store(kSlotFree, std::memory_order_release);
  held_.fetch_sub(1, std::memory_order_relaxed);
  header_->released.fetch_add(1, std::memory_order_release);
  FutexWakeAll(&header_->released);
}

}  // namespace stoker::shm
