#include "server/daemon/daemon.h"

#include <unistd.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "proto/spec_util.h"
#include "server/access/token.h"
#include "server/dataset/array_source.h"
#include "server/pipeline/spec_check.h"
#include "shm/futex.h"
#include "util/log.h"
#include "util/process.h"
#include "util/status_macros.h"
#include "util/version.h"

namespace stoker {
namespace {

uint64_t RandomGeneration() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// Session ids begin at a point of their own in each daemon (below 2^53,
// exact in a double): an id kept from before a restart names no session of
// the new daemon, whose clients reconnect by themselves.
uint64_t FirstSessionId(uint64_t generation) {
  return 1 + (generation % 1'000'000) * 1'000'000;
}

DaemonOptions WithMachineDefaults(DaemonOptions options) {
  const int cores = std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  if (options.decode_threads <= 0) options.decode_threads = cores;
  if (options.max_decode_threads <= 0) options.max_decode_threads = cores;
  if (options.fs == nullptr) options.fs = FileSystem::Default();
  return options;
}

// Sample `index`'s files: for typed arrays each array's name, shape and,
// where its file says, affine (4 x 4); else the sample's files.
void DescribeFiles(const Dataset& d, uint64_t index, v1::SampleFiles* out) {
  const Sample& s = d.sample(index);
  const ArraySource* arrays = d.source != nullptr ? d.source->arrays() : nullptr;
  if (arrays == nullptr) {
    for (size_t k = 0; k <= s.more.size(); ++k) out->add_files()->set_path(s.file(k));
    return;
  }
  for (uint32_t f = 0; f < arrays->files(); ++f) {
    v1::SampleFile* file = out->add_files();
    file->set_path(arrays->FileName(index, f));
    for (uint64_t n : arrays->shape(index)) file->add_shape(n);
    const std::vector<double> affine = arrays->Affine(index, f);
    if (affine.size() != 12) continue;
    for (double a : affine) file->add_affine(a);
    for (double a : {0.0, 0.0, 0.0, 1.0}) file->add_affine(a);
  }
}

}  // namespace

Daemon::Daemon(DaemonOptions options)
    : options_(WithMachineDefaults(std::move(options))),
      generation_(RandomGeneration()),
      started_(absl::Now()),
      auth_(!options_.handoff_socket.empty(), options_.admin_gid),
      engine_(options_),
      quota_(RingLimits{options_.max_ring_bytes, options_.max_ring_bytes_per_user,
                        options_.max_sessions_per_user}),
      controller_(options_) {
  absl::MutexLock lock(&mu_);
  next_id_ = FirstSessionId(generation_);
}

Daemon::~Daemon() { Stop(); }

absl::Status Daemon::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (started_flag_) return absl::FailedPreconditionError("already started");
    started_flag_ = true;
  }
  STOKER_RETURN_IF_ERROR(engine_.Start());
  auth_.SetGuard(engine_.Guard());
  reaper_ = std::thread([this] {
    while (!RunLoggingExceptions("the reaper", [&] { ReapLoop(); })) {
    }
  });
  absl::MutexLock lock(&mu_);
  serving_ = true;
  return absl::OkStatus();
}

void Daemon::Stop() {
  // Nothing waits on a client, a store or a scan from here on: sessions
  // first see their datasets' reads cancelled (they publish and count
  // nothing more), then every client's opener and signer is cut.
  engine_.CancelScans();
  auth_.Stop();
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
  // Each on a thread of its own too: one that waits for a hung read
  // delays no other client's word of the shutdown.
  for (Entry& e : entries) {
    auto finish = [this, e = std::make_shared<Entry>(std::move(e))] {
      Finish(std::move(*e), shm::kClosedByShutdown);
    };
    if (!closing_.Start(finish)) finish();
  }
  closing_.Stop();  // These, and closes begun before.
  engine_.Stop();
}

namespace {

// The caller's object store access as the request gave it, for a remote
// source kind (null: none given, or a local source;
// its credentials null when the trainer has none). Each request is signed
// by the caller's client, through the signer the request's token names.
absl::StatusOr<std::shared_ptr<const ObjectStoreAccess>> AccessOf(
    const v1::DatasetSpec& spec, const v1::ObjectStoreAccess& a, Authorizer& auth,
    const Caller& caller) {
  if (!IsRemoteSource(spec) || a.endpoint().empty()) {
    return nullptr;
  }
  if (!a.secret_access_key().empty() || !a.session_token().empty()) {
    return absl::FailedPreconditionError(
        "the client sent its object store secret: this daemon takes none (each request is "
        "signed in the trainer's process); use a client as new as the daemon");
  }
  auto out = std::make_shared<ObjectStoreAccess>();
  STOKER_ASSIGN_OR_RETURN(out->endpoint, Endpoint::Parse(a.endpoint()));
  if (a.access_key_id().empty()) return std::shared_ptr<const ObjectStoreAccess>(std::move(out));
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<shm::OpenChannel> signer,
                          auth.TakeSigner(a.signer_token(), caller.uid));
  auto c = std::make_shared<S3Credentials>();
  c->access_key_id = a.access_key_id();
  if (!a.region().empty()) c->region = a.region();
  c->remote = [signer](const SigningRequest& r) -> absl::StatusOr<Signature> {
    STOKER_ASSIGN_OR_RETURN(std::string answer, signer->Sign(r.Encode()));
    return Signature::Parse(answer);
  };
  out->credentials = std::move(c);
  return std::shared_ptr<const ObjectStoreAccess>(std::move(out));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Dataset>> Daemon::LoadDataset(
    const v1::DatasetSpec& spec, const Caller& caller, const v1::ObjectStoreAccess& access,
    uint32_t pid, bool streamed) {
  STOKER_RETURN_IF_ERROR(CheckDatasetSpec(spec));
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<Beneath> beneath, auth_.Confine(spec, caller));
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const ObjectStoreAccess> objects,
                          AccessOf(spec, access, auth_, caller));
  // Shown in GetStats while it runs.
  const std::shared_ptr<OpeningProgress> progress =
      openings_.Begin(caller.uid, pid, DatasetLocation(spec).first);
  // What a source keeps is the caller's (admins: only the totals bind).
  STOKER_ASSIGN_OR_RETURN(
      std::shared_ptr<const Dataset> ds,
      engine_.OpenDataset(spec, std::move(beneath), caller.admin ? -1 : caller.uid,
                          std::move(objects), progress, streamed));
  return ds;
}

absl::StatusOr<v1::OpenSessionResponse> Daemon::OpenSession(
    const v1::OpenSessionRequest& request, const Caller& caller) {
  v1::SessionSpec spec = request.spec();  // Completed with the schema's defaults.
  STOKER_ASSIGN_OR_RETURN(Pipeline pipeline, CheckSessionSpec(&spec));
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    if (!serving_ || stopping_) {
      return absl::UnavailableError("the daemon is not serving");
    }
    id = next_id_++;
  }
  const bool streamed = spec.streamed_opening() && spec.start_epoch() == 0;
  STOKER_ASSIGN_OR_RETURN(const v1::DatasetSpec opened, SessionDataset(spec));
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const Dataset> dataset,
                          LoadDataset(opened, caller, request.object_store(),
                                      request.client_pid(), streamed));
  std::pair<int, std::string> placed;
  {
    absl::MutexLock lock(&mu_);
    std::vector<double> load(engine_.pools().size(), 0);
    for (const auto& [other, e] : sessions_) load[e.node] += e.session->Weight();
    STOKER_ASSIGN_OR_RETURN(placed,
                            engine_.pools().Place(spec.placement(), load, options_.sysfs));
  }
  PipelineContext ctx = engine_.Context(placed.first, caller.uid, generation_);
  // The ring's pages are allocated by a thread on the session's node, so
  // they are that node's memory.
  // The quotas are checked, and the ring's bytes reserved, before the ring
  // is allocated; concurrent opens see each other's reservations.
  auto admit = [&](uint64_t ring_bytes) { return quota_.Reserve(caller, id, ring_bytes); };
  absl::StatusOr<std::unique_ptr<ServingSession>> created;
  engine_.pools().RunOn(placed.first, [&] {
    created = ServingSession::Create(id, spec, std::move(pipeline), request.client_pid(),
                                     dataset, absl::StrCat(options_.shm_prefix, id),
                                     ctx, admit);
  });
  if (!created.ok()) {
    quota_.Release(id);
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
  if (session->slabs() != nullptr) {
    ring->set_slab_descriptors(session->slabs()->slots() + 1);
    ring->set_slab_kind(SlabKind(spec));
  }
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
  // A streamed opening's sizes are 0: not known yet.
  resp.set_dataset_samples(dataset->streamed() ? 0 : dataset->sample_count());
  resp.set_skipped_files(dataset->skipped_files);
  resp.set_num_classes(dataset->num_classes);
  resp.set_samples_per_epoch(session->order().samples_per_epoch());
  resp.set_batches_per_epoch(session->order().batches_per_epoch());
  resp.set_partitions(session->order().partitions());
  resp.set_order_key(session->order_key());
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
    // The reservation stays the session's until Close releases it. Start
    // only spawns the producer.
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      quota_.Release(id);
      return absl::UnavailableError("the daemon is shutting down");
    }
    session->Start();
    entry.session = std::move(session);
    sessions_.emplace(id, std::move(entry));
    ++opened_;
  }
  LogInfo(absl::StrCat("session ", id, " opened: ", dataset->description, ", ",
                       dataset->sample_count(),
                       dataset->streamed() ? " samples so far (streamed)" : " samples",
                       ", batch ",
                       spec.batch_size(), ", ring ", ring->shm_name(),
                       " (client pid ", request.client_pid(), ", ",
                       request.client_version().empty()
                           ? std::string("an unversioned client")
                           : absl::StrCat("stoker ",  // The client's words: escaped.
                                          absl::CHexEscape(absl::string_view(
                                              request.client_version()).substr(0, 32)),
                                          " protocol ", request.client_protocol()),
                       "), node ",
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
    quota_.SetOwner(session_id, e.owner_uid);
    // The kernel's view of the client's pid in this daemon's pid namespace
    // (0 when the client's is not visible from here, as across containers)
    // replaces the pid the client reported for the liveness check.
    e.peer_pid = peer_pid > 0 ? static_cast<uint32_t>(peer_pid) : 0;
    e.pid_visible = peer_pid > 0;
    return e.session->ring().Share();
  }
}

absl::StatusOr<std::vector<int>> Daemon::SlabDescriptors(uint64_t session_id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return absl::NotFoundError(absl::StrCat("no session ", session_id));
  shm::SlabRingWriter* slabs = it->second.session->slabs();
  return slabs == nullptr ? std::vector<int>() : slabs->HandOver();
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
    Reclaim(session_id, "client disconnected");
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
  std::shared_ptr<absl::Notification> closed = CloseApart(session_id, false, [session_id] {
    LogInfo(absl::StrCat("session ", session_id, " closed"));
  });
  if (closed == nullptr) return absl::NotFoundError(absl::StrCat("no session ", session_id));
  // Answered once closed, or once it has waited its while: the caller's
  // thread (gRPC's) is not held by a read that hangs.
  closed->WaitForNotificationWithTimeout(options_.close_wait);
  return absl::OkStatus();
}

std::optional<Daemon::Entry> Daemon::Take(uint64_t session_id) {
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return std::nullopt;
  Entry entry = std::move(it->second);
  sessions_.erase(it);
  ++closed_;
  return entry;
}

void Daemon::Finish(Entry entry, shm::CloseReason reason, bool discard) {
  // Only once the ring is gone (or this throws): a session still closing
  // (its reads in flight) keeps its ring's bytes and its place among its
  // user's sessions.
  absl::Cleanup release = [this, id = entry.session->id()] { quota_.Release(id); };
  entry.session->Stop(reason);  // The producer has stopped writing.
  // A client that is gone reads nothing more, and whatever still holds its
  // ring (a child it handed the descriptor to) must not pin our memory.
  if (discard) entry.session->DiscardRing();
  if (entry.on_close) entry.on_close();
  entry.session.reset();  // Unmaps the ring; the client's mapping may stay.
}

void Daemon::Reclaim(uint64_t session_id, const std::string& why) {
  CloseApart(session_id, /*discard=*/true, [this, session_id, why] {
    LogInfo(absl::StrCat("session ", session_id, ": ", why, ", ring reclaimed"));
    absl::MutexLock lock(&mu_);
    ++reclaimed_;  // Counted once its ring and quota are back.
  });
}

std::shared_ptr<absl::Notification> Daemon::CloseApart(uint64_t session_id, bool discard,
                                                       std::function<void()> then) {
  auto closed = std::make_shared<absl::Notification>();
  std::function<void()> finish;
  {
    // Taken and handed to a thread at once: a Stop that comes after finds
    // neither the session nor the thread's work unbegun (it waits for it).
    absl::MutexLock lock(&mu_);
    std::optional<Entry> entry = Take(session_id);
    if (!entry) return nullptr;
    finish = [this, e = std::make_shared<Entry>(*std::move(entry)), discard, closed,
              then = std::move(then)] {
      Finish(std::move(*e), shm::kClosedBySession, discard);
      if (then) then();
      closed->Notify();
    };
    if (closing_.Start(finish)) return closed;
  }
  finish();  // No thread to be had (logged): here, then.
  return closed;
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
    for (const auto& [id, why] : gone) Reclaim(id, why);
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
                          LoadDataset(request.dataset(), caller, v1::ObjectStoreAccess()));
  v1::WarmCacheResponse resp;
  resp.set_total(dataset->sample_count());
  const uint32_t concurrency =
      request.concurrency() == 0 ? 8 : std::min(request.concurrency(), 1024u);
  STOKER_ASSIGN_OR_RETURN(const uint64_t id,
                          engine_.warmer()->Start(std::move(dataset), concurrency));
  resp.set_job_id(id);
  return resp;
}

void Daemon::WaitForWarmJobs() {
  if (engine_.warmer() != nullptr) engine_.warmer()->Wait();
}

v1::DaemonStats Daemon::GetStats(const Caller& caller) const {
  v1::DaemonStats s;
  s.set_pid(static_cast<uint32_t>(getpid()));
  s.set_version(kVersion);
  s.set_protocol(kProtocol);
  s.set_uptime_seconds(absl::ToDoubleSeconds(absl::Now() - started_));
  s.set_decode_threads(engine_.pools_or_null() ? engine_.pools_or_null()->threads() : 0);
  s.set_numa(engine_.numa());
  s.set_autotune(options_.autotune);
  s.set_metrics_port(metrics_port_.load());
  engine_.AddStats(&s);
  openings_.AddStats(&s, caller.uid, caller.admin);
  absl::MutexLock lock(&mu_);
  s.set_sessions_opened(opened_);
  s.set_sessions_closed(closed_);
  s.set_sessions_reclaimed(reclaimed_);
  controller_.AddPoolStats(&s, engine_.pools_or_null(), engine_.reader_or_null());
  for (const auto& [id, e] : sessions_) *s.add_sessions() = VisibleStats(e, caller);
  std::sort(s.mutable_sessions()->begin(), s.mutable_sessions()->end(),
            [](const auto& a, const auto& b) { return a.session_id() < b.session_id(); });
  if (const CacheWarmer* warmer = engine_.warmer(); warmer != nullptr) {
    for (v1::WarmJob& job : warmer->Jobs()) {
      // Warm-ups are admins'; their datasets are for admins to see.
      if (!caller.admin) job.set_dataset("(an admin's warm-up)");
      *s.add_warm_jobs() = std::move(job);
    }
  }
  return s;
}

std::vector<v1::SessionStats> Daemon::ListSessions(const Caller& caller) const {
  std::vector<v1::SessionStats> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, e] : sessions_) out.push_back(VisibleStats(e, caller));
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.session_id() < b.session_id();
  });
  return out;
}

v1::SessionStats Daemon::VisibleStats(const Entry& e, const Caller& caller) const {
  v1::SessionStats s = e.session->Stats();
  s.set_client_wait_seconds(e.session->ring().ConsumerWaitNs() * 1e-9);
  s.set_batches_delivered(e.session->ring().ConsumerBatches());
  controller_.AddSessionView(&s);
  s.set_client_uid(e.owner_uid);
  s.set_placement(e.placement);
  if (!caller.admin && e.owner_uid != caller.uid) {
    s.set_dataset("(another user's session)");
    s.set_client_pid(0);
    s.clear_failure();  // It may name the other user's files.
  }
  return s;
}

absl::StatusOr<v1::DescribeSamplesResponse> Daemon::DescribeSamples(
    const v1::DescribeSamplesRequest& request, const Caller& caller) {
  if (request.indices_size() > 1024) {
    return absl::InvalidArgumentError("at most 1024 indices per call");
  }
  std::shared_ptr<const Dataset> dataset;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(request.session_id());
    if (it == sessions_.end()) {
      return absl::NotFoundError(absl::StrCat("no session ", request.session_id()));
    }
    if (!caller.admin && it->second.owner_uid != caller.uid) {
      return absl::PermissionDeniedError(absl::StrCat(
          "session ", request.session_id(), " belongs to another user"));
    }
    dataset = it->second.session->shared_dataset();
  }
  v1::DescribeSamplesResponse resp;
  for (uint64_t index : request.indices()) {
    const uint64_t n = dataset->sample_count();
    if (index >= n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sample index ", index, " is outside the dataset's ", n, " samples",
          dataset->streamed() ? " so far" : ""));
    }
    resp.add_paths(dataset->sample(index).path);
    DescribeFiles(*dataset, index, resp.add_samples());
  }
  return resp;
}

void Daemon::ControlTick(uint64_t now_ns) {
  std::vector<Controller::Member> members;
  for (const auto& [id, e] : sessions_) {
    members.push_back({id, e.node, e.owner_uid, e.session.get()});
  }
  controller_.Tick(now_ns, members, engine_.pools(), engine_.reader());
}

absl::StatusOr<v1::ResizePoolResponse> Daemon::ResizePool(
    const v1::ResizePoolRequest& request, const Caller& caller) {
  STOKER_RETURN_IF_ERROR(Authorizer::RequireAdmin(caller, "resizing pools"));
  absl::MutexLock lock(&mu_);
  if (!serving_ || stopping_) return absl::UnavailableError("the daemon is not serving");
  return controller_.Resize(request, engine_.pools(), engine_.reader());
}

}  // namespace stoker
