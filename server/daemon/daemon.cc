#include "server/daemon/daemon.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/spec_util.h"
#include "server/sources/source.h"
#include "server/pipeline/spec_check.h"
#include "shm/futex.h"
#include "shm/segment.h"
#include "util/log.h"
#include "util/status_macros.h"
#include "server/access/token.h"
#include "util/process.h"
#include "util/version.h"
#include "util/cache_key.h"

namespace stoker {

// The thread pool group volume decodes' chunks run in (sessions' groups are
// their ids, from 1).
constexpr uint64_t kVolumeDecodeGroup = UINT64_MAX;
namespace {


uint64_t RandomGeneration() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// The files all users' sources may keep open or mapped together: three
// quarters of this process's descriptor limit and of vm.max_map_count,
// whichever is lower; the rest is the daemon's own.
uint64_t HeldFilesLimit() {
  uint64_t limit = 65530;  // The kernel's default vm.max_map_count.
  if (std::ifstream maps("/proc/sys/vm/max_map_count"); maps) maps >> limit;
  struct rlimit files {};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY) {
    limit = std::min<uint64_t>(limit, files.rlim_cur);
  }
  return limit / 4 * 3;
}


}  // namespace

Daemon::Daemon(DaemonOptions options)
    : options_([&] {
        if (options.decode_threads <= 0) {
          options.decode_threads =
              std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
        }
        if (options.fs == nullptr) options.fs = FileSystem::Default();
        if (options.max_decode_threads <= 0) {
          options.max_decode_threads =
              std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
        }
        return options;
      }()),
      generation_(RandomGeneration()),
      started_(absl::Now()),
      auth_(!options_.handoff_socket.empty(), options_.admin_gid),
      l1_("l1", options_.l1_bytes),
      decoded_cache_("decoded", options_.decoded_cache_bytes),
      pixel_ram_("pixels", options_.pixel_cache_bytes),
      volumes_(options_.volume_cache_bytes,
               [this](size_t n, const std::function<void(size_t)>& fn) {
                 // Sessions open after Start; node 0's pool, in a group of
                 // its own so a decode takes turns with the sessions.
                 ThreadPool* pool = decode_pools_ ? &decode_pools_->pool(0) : nullptr;
                 ParallelFor(pool, pool ? pool->size() : 0, n, fn, kVolumeDecodeGroup);
               }),
      array_ram_(options_.l1_bytes, options_.max_array_bytes_per_user),
      list_ram_(UINT64_MAX, options_.max_list_bytes_per_user),
      held_files_(HeldFilesLimit(), options_.max_open_files_per_user),
      monitor_([this] {
        LoadMonitor::Options o;
        o.min_reader_threads = options_.reader_threads;
        o.max_reader_threads = options_.max_reader_threads;
        return o;
      }()) {}

Daemon::~Daemon() {
  Stop();
  // Pools run what is queued, then join; L2 writes what is queued.
  reader_pool_.reset();
  decode_pools_.reset();
  l2_.reset();
}

namespace {
std::string NodeCount(const Topology& t) {
  return absl::StrCat(t.size(), t.size() == 1 ? " node" : " nodes");
}
}  // namespace

absl::Status Daemon::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (started_flag_) return absl::FailedPreconditionError("already started");
    started_flag_ = true;
  }
  // The decode pools' nodes: hand-made (checked even with --numa off), the
  // machine's, or one unpinned pool.
  Topology topology = Topology::Single();
  const char* source = nullptr;
  if (!options_.numa_topology.empty()) {
    STOKER_ASSIGN_OR_RETURN(Topology parsed, Topology::Parse(options_.numa_topology));
    if (options_.numa != NumaMode::kOff) {
      topology = std::move(parsed);
      source = "--numa-topology";
    }
  } else if (options_.numa != NumaMode::kOff) {
    Topology detected = Topology::Detect();
    if (options_.numa == NumaMode::kOn || detected.size() > 1) {
      topology = std::move(detected);
      source = "libnuma";
    }
  }
  const bool pinned = source != nullptr;
  numa_ = pinned ? absl::StrCat(NodeCount(topology), " (", source, ")")
          : options_.numa == NumaMode::kOff ? "off"
                                            : "off (one node)";
  if (!options_.l2.path.empty()) {
    auto l2 = L2Cache::Open(options_.l2);
    if (!l2.ok()) return l2.status();
    l2_ = *std::move(l2);
    // Decoded volumes spill to L2, under keys of their own; a volume key
    // names its file's version, so the L2 entry's own version is none.
    L2Cache* l2_cache = l2_.get();
    volumes_.set_spill(VolumeCache::Spill{
        [l2_cache](const std::string& key, const Buffer& bytes) {
          l2_cache->Put(CacheKey({"volume", key}), FileVersion{}, bytes, L2Cache::kNobody);
        },
        [l2_cache](const std::string& key, uint64_t bytes, uint8_t* out) {
          bool copied = false;
          l2_cache->Lookup(CacheKey({"volume", key}), FileVersion{}, [&](absl::string_view payload) {
            if (payload.size() != bytes) return;
            std::memcpy(out, payload.data(), bytes);
            copied = true;
          });
          return copied;
        }});
  }
  auth_.SetGuard(MakeGuard());
  pixels_ = std::make_unique<PixelCache>(&pixel_ram_, l2_.get());
  fetcher_ = std::make_unique<SampleFetcher>(&l1_, l2_.get(),
                                             options_.reader_threads);
  reader_pool_ =
      std::make_unique<ThreadPool>("stoker-io", options_.reader_threads);
  warmer_ = std::make_unique<CacheWarmer>(
      [pool = reader_pool_.get()](std::function<void()> task) { pool->Schedule(std::move(task)); },
      [fetcher = fetcher_.get()](const Dataset& ds, const std::string& file, bool* from_source) {
        // Warm-ups are admins': their entries are the daemon's own.
        return fetcher->Fetch(ds, file, L2Cache::kNobody, from_source).status();
      });
  const int threads = options_.decode_threads > 0 ? options_.decode_threads
                                                 : topology.total_cpus();
  decode_pools_ = std::make_unique<NodePools>("stoker-dec", topology, pinned,
                                              threads, options_.numa_spill);
  // Volumes filled chunk by chunk fill the rest on producers whose rings
  // are full (server/pool/idle_work.h).
  volumes_.set_background([this](std::function<void()> task) { idle_.Post(std::move(task)); });
  for (int n = 0; pinned && n < topology.size(); ++n) {
    LogInfo(absl::StrCat("decode pool of node ", n, ": CPUs ",
                         FormatCpuList(topology.nodes()[n].cpus), ", ",
                         decode_pools_->pool(n).size(), " threads"));
  }
  reaper_ = std::thread([this] {
    while (!RunLoggingExceptions("the reaper", [&] { ReapLoop(); })) {
    }
  });
  absl::MutexLock lock(&mu_);
  serving_ = true;
  return absl::OkStatus();
}

void Daemon::Stop() {
  stopping_scans_.store(true);  // Folder scans in progress give up.
  std::vector<Entry> entries;
  {
    absl::MutexLock lock(&mu_);
    if (!started_flag_ || stopping_) return;
    stopping_ = true;
    for (auto& [id, e] : sessions_) entries.push_back(std::move(e));
    sessions_.clear();
    closed_ += entries.size();
  }
  stop_reaper_.Notify();
  if (reaper_.joinable()) reaper_.join();
  for (Entry& e : entries) Finish(std::move(e), shm::kClosedByShutdown);
  idle_.Stop();  // No producer is left to run it.
  if (warmer_) warmer_->Stop();
  // The pool lives until the destructor: an OpenSession racing with Stop
  // may still hold it for the session it is about to discard.
}

ScanLimits Daemon::ScanLimitsNow() const {
  ScanLimits limits = options_.scan_limits;
  limits.cancel = &stopping_scans_;
  return limits;
}

absl::StatusOr<std::shared_ptr<const Dataset>> Daemon::LoadDataset(
    const v1::DatasetSpec& spec, const Caller& caller) {
  STOKER_RETURN_IF_ERROR(CheckDatasetSpec(spec));
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<Beneath> beneath,
                          auth_.Confine(spec, caller));
  if (beneath != nullptr) {
    beneath->charge_held = [this, uid = caller.uid](uint64_t n) {
      return held_files_.Charge(uid, n);
    };
  }
  SourceContext ctx;
  ctx.limits = ScanLimitsNow();
  ctx.limits.fs = options_.fs;
  ctx.limits.max_file_bytes = options_.max_file_bytes;
  ctx.beneath = std::move(beneath);
  // RAM a source keeps is the caller's (admins: only the total binds).
  const int64_t uid = caller.admin ? -1 : caller.uid;
  ctx.charge = [this, uid](uint64_t bytes) { return array_ram_.Charge(uid, bytes); };
  ctx.limits.charge_list = [this, uid](uint64_t bytes) { return list_ram_.Charge(uid, bytes); };
  ctx.volumes = &volumes_;
  ctx.uid = uid;
  STOKER_ASSIGN_OR_RETURN(Dataset ds, OpenDataset(spec, ctx));
  return std::make_shared<const Dataset>(std::move(ds));
}

absl::StatusOr<v1::OpenSessionResponse> Daemon::OpenSession(
    const v1::OpenSessionRequest& request, const Caller& caller) {
  const v1::SessionSpec& spec = request.spec();
  STOKER_ASSIGN_OR_RETURN(Pipeline pipeline, CheckSessionSpec(spec));
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    if (!serving_ || stopping_) {
      return absl::UnavailableError("the daemon is not serving");
    }
    id = next_id_++;
  }
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const Dataset> dataset,
                          LoadDataset(spec.dataset(), caller));
  PlanSpec ps;
  ps.num_samples = dataset->samples.size();
  ps.batch_size = spec.batch_size();
  ps.shuffle = spec.shuffle();
  ps.seed = spec.seed();
  ps.rank = spec.rank();
  ps.world_size = std::max<uint32_t>(spec.world_size(), 1);
  ps.drop_last = spec.drop_last();
  STOKER_ASSIGN_OR_RETURN(EpochPlan plan, EpochPlan::Create(ps));
  std::pair<int, std::string> placed;
  {
    absl::MutexLock lock(&mu_);
    std::vector<double> load(decode_pools_->size(), 0);
    for (const auto& [other, e] : sessions_) load[e.node] += e.session->Weight();
    STOKER_ASSIGN_OR_RETURN(placed,
                            decode_pools_->Place(spec.placement(), load, options_.sysfs));
  }
  PipelineContext ctx{reader_pool_.get(), decode_pools_.get(), placed.first,
                      fetcher_.get(), &decoded_cache_, pixels_.get(), &counters_, &error_log_,
                      generation_, options_.decode_limits, &idle_, caller.uid};
  // The ring's pages are allocated by a thread on the session's node, so
  // they are that node's memory.
  // The quotas are checked, and the ring's bytes reserved, before the ring
  // is allocated; concurrent opens see each other's reservations.
  auto admit = [&](uint64_t ring_bytes) { return Reserve(caller, id, ring_bytes); };
  absl::StatusOr<std::unique_ptr<ServingSession>> created;
  decode_pools_->RunOn(placed.first, [&] {
    created = ServingSession::Create(id, spec, std::move(pipeline), request.client_pid(),
                                     dataset, plan,
                                     absl::StrCat(options_.shm_prefix, id),
                                     ctx, admit);
  });
  if (!created.ok()) {
    absl::MutexLock lock(&mu_);
    Unreserve(id);
    return created.status();
  }
  std::unique_ptr<ServingSession> session = *std::move(created);

  v1::OpenSessionResponse resp;
  resp.set_session_id(id);
  v1::RingInfo* ring = resp.mutable_ring();
  ring->set_shm_name(session->ring().name());
  ring->set_segment_bytes(session->ring().layout().segment_bytes);
  ring->set_slots(session->ring().layout().slot_count);
  ring->set_layout_version(shm::kLayoutVersion);
  const shm::RingLayout& layout = session->ring().layout();
  for (uint32_t f = 0; f < layout.field_count; ++f) {
    v1::FieldInfo* field = ring->add_fields();
    field->set_name(layout.fields[f].name);
    field->set_dtype(ProtoDType(layout.fields[f].dtype));
    for (uint32_t d = 0; d < layout.fields[f].ndim; ++d) {
      field->add_shape(layout.fields[f].shape[d]);
    }
  }
  // Without a handoff socket only this process can redeem the token
  // (HandOffRing), as in-process tests do.
  const std::string token = RandomToken();
  ring->set_handoff_socket(options_.handoff_socket);
  ring->set_handoff_token(token);
  resp.set_dataset_samples(dataset->samples.size());
  resp.set_skipped_files(dataset->skipped_files);
  resp.set_num_classes(dataset->num_classes);
  resp.set_samples_per_epoch(plan.samples_per_epoch());
  resp.set_batches_per_epoch(plan.batches_per_epoch());
  for (v1::ClientDecodeField& f : session->pipeline().ClientFields()) {
    *resp.add_client_decode() = std::move(f);
  }

  Entry entry;
  entry.node = placed.first;
  entry.placement = placed.second;
  entry.handoff_token = token;
  entry.owner_uid = caller.uid;
  entry.pid_visible = request.client_pid() != 0 &&
                      !ProcessGone(request.client_pid());
  {
    // The reservation becomes the session under one lock, so the quotas
    // never see it twice or not at all. Start only spawns the producer.
    absl::MutexLock lock(&mu_);
    Unreserve(id);
    if (stopping_) {
      return absl::UnavailableError("the daemon is shutting down");
    }
    session->Start();
    entry.session = std::move(session);
    sessions_.emplace(id, std::move(entry));
    ++opened_;
  }
  LogInfo(absl::StrCat("session ", id, " opened: ", dataset->description, ", ",
                       dataset->samples.size(), " samples, batch ",
                       spec.batch_size(), ", ring ", ring->shm_name(),
                       " (client pid ", request.client_pid(), "), node ",
                       placed.first, " (", placed.second, ")"));
  return resp;
}

absl::StatusOr<int> Daemon::HandOffRing(uint64_t session_id,
                                        const std::string& token,
                                        uid_t peer_uid, pid_t peer_pid) {
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(session_id);
    if (it == sessions_.end()) {
      return absl::NotFoundError(absl::StrCat("no session ", session_id));
    }
    Entry& e = it->second;
    if (!ConstantTimeEquals(token, e.handoff_token)) {
      return absl::PermissionDeniedError(
          absl::StrCat("wrong handoff token for session ", session_id));
    }
    if (e.owner_uid >= 0 && e.owner_uid != static_cast<int64_t>(peer_uid)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "session ", session_id, " belongs to another user"));
    }
    e.owner_uid = peer_uid;
    // The kernel's view of the client's pid in this daemon's pid namespace
    // (0 when the client's is not visible from here, as across containers)
    // replaces the pid the client reported for the liveness check.
    e.peer_pid = peer_pid > 0 ? static_cast<uint32_t>(peer_pid) : 0;
    e.pid_visible = peer_pid > 0;
    return e.session->ring().Share();
  }
}

absl::Status Daemon::Attach(uint64_t session_id,
                            std::function<void()> on_close,
                            const Caller& caller) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) {
    return absl::NotFoundError(absl::StrCat("no session ", session_id));
  }
  // Only the owner's process may hold the stream that keeps it alive.
  if (caller.uid >= 0 && it->second.owner_uid >= 0 &&
      caller.uid != it->second.owner_uid) {
    return absl::PermissionDeniedError(
        absl::StrCat("session ", session_id, " belongs to another user"));
  }
  if (it->second.attached) {
    return absl::FailedPreconditionError(
        absl::StrCat("session ", session_id, " is already attached"));
  }
  it->second.attached = true;
  it->second.on_close = std::move(on_close);
  return absl::OkStatus();
}

void Daemon::Detach(uint64_t session_id, bool client_gone) {
  if (client_gone) {
    if (Close(session_id, shm::kClosedBySession, /*reclaimed=*/true)) {
      LogInfo(absl::StrCat("session ", session_id,
                           ": client disconnected, ring reclaimed"));
    }
    return;
  }
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session_id);
  if (it != sessions_.end()) it->second.on_close = nullptr;
}

absl::Status Daemon::CloseSession(uint64_t session_id, const Caller& caller) {
  if (!caller.admin) {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(session_id);
    if (it != sessions_.end() && it->second.owner_uid != caller.uid) {
      return absl::PermissionDeniedError(absl::StrCat(
          "session ", session_id, " belongs to another user; only its owner "
          "or an admin may close it"));
    }
  }
  if (!Close(session_id, shm::kClosedBySession, /*reclaimed=*/false)) {
    return absl::NotFoundError(absl::StrCat("no session ", session_id));
  }
  LogInfo(absl::StrCat("session ", session_id, " closed"));
  return absl::OkStatus();
}

bool Daemon::Close(uint64_t session_id, shm::CloseReason reason,
                   bool reclaimed) {
  Entry entry;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(session_id);
    if (it == sessions_.end()) return false;
    entry = std::move(it->second);
    sessions_.erase(it);
    ++closed_;
    if (reclaimed) ++reclaimed_;
  }
  Finish(std::move(entry), reason, /*discard=*/reclaimed);
  return true;
}

void Daemon::Finish(Entry entry, shm::CloseReason reason, bool discard) {
  entry.session->Stop(reason);  // The producer has stopped writing.
  // A client that is gone reads nothing more, and whatever still holds its
  // ring (a child it handed the descriptor to) must not pin our memory.
  if (discard) entry.session->DiscardRing();
  if (entry.on_close) entry.on_close();
  entry.session.reset();  // Unmaps the ring; the client's mapping may stay.
}

void Daemon::ReapLoop() {
  while (!stop_reaper_.WaitForNotificationWithTimeout(options_.reap_interval)) {
    std::vector<std::pair<uint64_t, std::string>> gone;
    {
      absl::MutexLock lock(&mu_);
      ControlTick(shm::MonotonicNanos());
      const absl::Time now = absl::Now();
      for (auto& [id, e] : sessions_) {
        e.session->Heartbeat();
        const uint32_t pid = e.peer_pid > 0 ? e.peer_pid : e.session->client_pid();
        if (e.pid_visible && ProcessGone(pid)) {
          gone.emplace_back(id, "client process exited");
        } else if (!e.attached && options_.attach_timeout > absl::ZeroDuration() &&
                   now - e.opened > options_.attach_timeout) {
          gone.emplace_back(id, absl::StrCat("never attached within ",
                                             absl::FormatDuration(options_.attach_timeout)));
        }
      }
    }
    for (const auto& [id, why] : gone) {
      if (Close(id, shm::kClosedBySession, /*reclaimed=*/true)) {
        LogInfo(absl::StrCat("session ", id, ": ", why, ", ring reclaimed"));
      }
    }
  }
}

absl::StatusOr<v1::WarmCacheResponse> Daemon::WarmCache(
    const v1::WarmCacheRequest& request, const Caller& caller) {
  STOKER_RETURN_IF_ERROR(Authorizer::RequireAdmin(caller, "warming the caches"));
  {
    absl::MutexLock lock(&mu_);
    if (!serving_ || stopping_) {
      return absl::UnavailableError("the daemon is not serving");
    }
  }
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const Dataset> dataset,
                          LoadDataset(request.dataset(), caller));
  v1::WarmCacheResponse resp;
  resp.set_total(dataset->samples.size());
  const uint32_t concurrency =
      request.concurrency() == 0 ? 8 : std::min(request.concurrency(), 1024u);
  STOKER_ASSIGN_OR_RETURN(const uint64_t id, warmer_->Start(std::move(dataset), concurrency));
  resp.set_job_id(id);
  return resp;
}

void Daemon::WaitForWarmJobs() {
  if (warmer_) warmer_->Wait();
}

v1::DaemonStats Daemon::GetStats(const Caller& caller) const {
  v1::DaemonStats s;
  s.set_pid(static_cast<uint32_t>(getpid()));
  s.set_version(kVersion);
  s.set_uptime_seconds(absl::ToDoubleSeconds(absl::Now() - started_));
  s.set_decode_threads(decode_pools_ ? decode_pools_->threads() : 0);
  s.set_numa(numa_);
  s.set_autotune(options_.autotune);
  s.set_metrics_port(metrics_port_.load());
  s.set_samples_decoded(counters_.samples_decoded.load(std::memory_order_relaxed));
  *s.mutable_reader() = fetcher_ ? fetcher_->Stats() : v1::ReaderStats();
  *s.mutable_read_latency() = counters_.fetch.Snapshot();
  *s.mutable_decode_latency() = counters_.decode.Snapshot();
  *s.mutable_transform_latency() = counters_.transform.Snapshot();
  s.set_samples_failed_read(counters_.samples_failed_read.load(std::memory_order_relaxed));
  s.set_samples_failed_decode(
      counters_.samples_failed_decode.load(std::memory_order_relaxed));
  s.set_samples_failed(s.samples_failed_read() + s.samples_failed_decode());
  s.set_bytes_read(s.reader().source_bytes());
  *s.add_tiers() = l1_.Stats();
  if (l2_) {
    *s.add_tiers() = l2_->Stats();
  } else {
    s.add_tiers()->set_tier("l2");  // enabled = false
  }
  *s.add_tiers() = decoded_cache_.Stats();
  *s.add_tiers() = pixel_ram_.Stats();
  s.set_pixel_cache_decodes(pixels_ ? pixels_->decodes() : 0);
  *s.add_tiers() = volumes_.Stats();
  s.set_volume_cache_decodes(volumes_.decodes());
  s.set_volume_cache_chunks(volumes_.pieces());
  s.set_volume_cache_idle_chunks(volumes_.background_pieces());
  s.set_volume_cache_oversized(volumes_.oversized());
  s.set_volume_cache_spilled(volumes_.spilled());
  s.set_volume_cache_unspilled(volumes_.unspilled());
  s.set_batches_published(
      counters_.batches_published.load(std::memory_order_relaxed));
  absl::MutexLock lock(&mu_);
  s.set_sessions_opened(opened_);
  s.set_sessions_closed(closed_);
  s.set_sessions_reclaimed(reclaimed_);
  s.set_autotune_changes(autotune_changes_);
  auto add_pool = [&s](const char* name, const ThreadPool& pool, double busy) {
    v1::PoolStats* p = s.add_pools();
    p->set_pool(name);
    p->set_threads(pool.size());
    p->set_busy_seconds(pool.busy_ns() * 1e-9);
    p->set_busy_fraction(busy);
    p->set_queued(pool.queued());
    return p;
  };
  for (int n = 0; decode_pools_ && n < decode_pools_->size(); ++n) {
    v1::PoolStats* p = add_pool("decode", decode_pools_->pool(n), monitor_.decode_busy(n));
    p->set_node(n);
    if (decode_pools_->pinned()) {
      p->set_cpus(FormatCpuList(decode_pools_->topology().nodes()[n].cpus));
    }
    p->set_spilled_in(decode_pools_->spilled_in(n));
  }
  if (reader_pool_) add_pool("reader", *reader_pool_, monitor_.reader_busy());
  for (const auto& [id, e] : sessions_) *s.add_sessions() = VisibleStats(e, caller);
  std::sort(s.mutable_sessions()->begin(), s.mutable_sessions()->end(),
            [](const auto& a, const auto& b) { return a.session_id() < b.session_id(); });
  if (warmer_) {
    for (v1::WarmJob& job : warmer_->Jobs()) {
      // Warm-ups are admins'; their datasets are for admins to see.
      if (!caller.admin) job.set_dataset("(an admin's warm-up)");
      *s.add_warm_jobs() = std::move(job);
    }
  }
  return s;
}

}  // namespace stoker
