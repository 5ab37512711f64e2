#include "client/cpp/client.h"
#include "client/cpp/batch_lease.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/synchronization/mutex.h"
#include "client/cpp/daemon_connection.h"
#include "client/cpp/dataset_spec.h"
#include "client/cpp/object_store_access.h"
#include "client/cpp/ring_mapping.h"
#include "client/cpp/session_signer.h"
#include "grpcpp/grpcpp.h"
#include "proto/health.grpc.pb.h"
#include "proto/spec_util.h"
#include "proto/stoker.grpc.pb.h"
#include "shm/fd_passing.h"
#include "shm/futex.h"
#include "shm/open_channel.h"
#include "shm/ring.h"
#include "util/status_macros.h"
#include "util/version.h"

namespace stoker {
namespace {

constexpr absl::Duration kRpcTimeout = absl::Seconds(60);
// OpenSession waits for the dataset's opening (a bucket's listing, shards
// read to index them), which the daemon bounds (--dataset-scan-timeout,
// 10 min by default): minutes, not seconds.
constexpr absl::Duration kOpenTimeout = absl::Hours(1);


// One unary call on the stub with the standard deadline.
template <typename Req, typename Resp>
absl::StatusOr<Resp> Call(
    v1::Stoker::Stub* stub, const std::string& token,
    grpc::Status (v1::Stoker::Stub::*method)(grpc::ClientContext*, const Req&, Resp*),
    const Req& req) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(kRpcTimeout));
  Identify(&ctx, token);
  Resp resp;
  STOKER_RETURN_IF_ERROR(FromGrpc((stub->*method)(&ctx, req, &resp)));
  return resp;
}

}  // namespace

// Everything a session's batches need to stay valid: the ring mapping. The
// Attach stream lives here too but is ended by Session's destructor, not by
// the last batch.
class SessionCore {
 public:
  SessionCore(std::shared_ptr<v1::Stoker::Stub> stub, std::string token,
              v1::OpenSessionResponse info, MappedRing ring,
              std::unique_ptr<shm::OpenServer> opener)
      : stub_(std::move(stub)),
        token_(std::move(token)),
        info_(std::move(info)),
        ring_(std::move(ring)),
        opener_(std::move(opener)) {}
  ~SessionCore() { EndAttach(); }

  // Opens the Attach stream and waits for the daemon's ATTACHED event.
  absl::Status StartAttach() {
    v1::AttachRequest req;
    req.set_session_id(info_.session_id());
    Identify(&attach_ctx_, token_);
    reader_ = stub_->Attach(&attach_ctx_, req);
    v1::AttachEvent ev;
    if (!reader_->Read(&ev)) {
      absl::Status s = FromGrpc(reader_->Finish());
      reader_.reset();
      return s.ok() ? absl::UnavailableError("Attach stream ended at once") : s;
    }
    attach_thread_ = std::thread([this] {
      v1::AttachEvent more;
      while (reader_->Read(&more)) {
      }
      absl::Status s = FromGrpc(reader_->Finish());
      absl::MutexLock lock(&mu_);
      attach_done_ = true;
      attach_status_ = s;
    });
    return absl::OkStatus();
  }

  void EndAttach() {
    if (attach_thread_.joinable()) {
      attach_ctx_.TryCancel();
      attach_thread_.join();
    }
  }

  absl::Status Liveness() const {
    absl::MutexLock lock(&mu_);
    if (!attach_done_) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat(
        "the control stream to the daemon ended (",
        attach_status_.ok() ? "session closed" : attach_status_.ToString(),
        ")"));
  }

  // Why the daemon closed the ring with an error (SessionStats.failure);
  // `fallback` when it does not say.
  absl::Status Failure(const absl::Status& fallback) {
    absl::StatusOr<v1::GetStatsResponse> stats = Call(
        stub_.get(), token_, &v1::Stoker::Stub::GetStats, v1::GetStatsRequest());
    if (!stats.ok()) return fallback;
    for (const v1::SessionStats& s : stats->daemon().sessions()) {
      if (s.session_id() == info_.session_id() && s.failure_code() != 0) {
        return absl::Status(static_cast<absl::StatusCode>(s.failure_code()),
                            absl::StrCat("session ", s.session_id(), " failed in the daemon: ",
                                         s.failure()));
      }
    }
    return fallback;
  }

  absl::StatusOr<v1::DescribeSamplesResponse> Describe(const std::vector<uint64_t>& indices) {
    v1::DescribeSamplesRequest req;
    req.set_session_id(info_.session_id());
    for (uint64_t i : indices) req.add_indices(i);
    return Call(stub_.get(), token_, &v1::Stoker::Stub::DescribeSamples, req);
  }

  // Closes the session in the daemon, then ends the stream.
  absl::Status Close(absl::Duration timeout) {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(timeout));
    Identify(&ctx, token_);
    v1::CloseSessionRequest req;
    req.set_session_id(info_.session_id());
    v1::CloseSessionResponse resp;
    absl::Status s = FromGrpc(stub_->CloseSession(&ctx, req, &resp));
    EndAttach();
    return s;
  }

  const v1::OpenSessionResponse& info() const { return info_; }
  shm::RingConsumer& ring() const { return *ring_.ring; }
  shm::SlabRingReader* slabs() const { return ring_.slabs.get(); }  // Null: none.

 private:
  const std::shared_ptr<v1::Stoker::Stub> stub_;
  const std::string token_;
  const v1::OpenSessionResponse info_;
  const MappedRing ring_;
  // Opens the dataset's files for the daemon, with this process's rights,
  // for as long as the session may read (null: an unconfined daemon).
  const std::unique_ptr<shm::OpenServer> opener_;
  grpc::ClientContext attach_ctx_;
  std::unique_ptr<grpc::ClientReader<v1::AttachEvent>> reader_;
  std::thread attach_thread_;
  mutable absl::Mutex mu_;
  bool attach_done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status attach_status_ ABSL_GUARDED_BY(mu_);
};

// ---------------------------------------------------------------- Session

Session::Session(std::shared_ptr<SessionCore> core, std::string socket_path,
                 v1::SessionSpec spec)
    : core_(std::move(core)),
      socket_path_(std::move(socket_path)),
      spec_(std::move(spec)) {}

Session::~Session() {
  // Best effort: if the daemon is gone the stream's end is all there is.
  if (!closed_ && core_) core_->Close(absl::Seconds(2)).IgnoreError();
}

uint64_t Session::id() const { return core_->info().session_id(); }

void Session::SetCpuShare(double share) {
  share_ = std::clamp(share, 0.0, 1.0);
  core_->ring().SetCpuShare(
      static_cast<uint32_t>(std::lround(share_ * shm::kShareOne)));
}

Session::DaemonDecode Session::daemon_decode() const {
  const shm::RingConsumer::ProducerRate r = core_->ring().producer_rate();
  DaemonDecode d;
  d.samples = r.samples;
  d.nanos = r.nanos;
  d.threads = r.threads;
  d.share = double(r.share) / shm::kShareOne;
  return d;
}
const v1::OpenSessionResponse& Session::info() const { return core_->info(); }

absl::StatusOr<Batch> Session::Next(absl::Duration timeout) {
  return NextUpTo(UINT64_MAX, timeout);
}

absl::StatusOr<Batch> Session::NextInEpoch(uint64_t epoch, absl::Duration timeout) {
  return NextUpTo(epoch, timeout);
}

uint64_t Session::batches_per_epoch() const {
  const uint64_t answered = info().batches_per_epoch();
  if (answered != 0) return answered;
  const uint64_t n = core_->ring().batches_per_epoch();
  return n == shm::kOpeningFailed ? 0 : n;
}

absl::StatusOr<uint64_t> Session::WaitBatchesPerEpoch(absl::Duration timeout) {
  if (const uint64_t n = batches_per_epoch(); n != 0) return n;
  SessionCore* core = core_.get();
  absl::StatusOr<uint64_t> n =
      core_->ring().WaitBatchesPerEpoch(timeout, [core] { return core->Liveness(); });
  if (!n.ok() && (core_->ring().close_reason() == shm::kClosedByError ||
                 core_->ring().batches_per_epoch() == shm::kOpeningFailed)) {
    return core_->Failure(n.status());
  }
  return n;
}

absl::StatusOr<Batch> Session::NextUpTo(uint64_t last_epoch, absl::Duration timeout) {
  if (closed_) {
    return absl::FailedPreconditionError(
        absl::StrCat("session ", id(), " was closed by this client"));
  }
  const absl::Time deadline = absl::Now() + timeout;  // Infinite stays so.
  while (true) {
    absl::StatusOr<Batch> b = NextFromRing(deadline - absl::Now(), last_epoch);
    if (b.ok()) {
      delivered_any_ = true;
      last_epoch_ = b->epoch();
      last_batch_ = b->batch_index();
      if (spec_.on_error() == v1::ON_ERROR_RAISE && b->error_count() > 0) {
        return FailedSamplesError(*b);
      }
      return b;
    }
    if (!Resumable(b.status())) {
      if (core_->ring().close_reason() == shm::kClosedByError) return core_->Failure(b.status());
      return b.status();
    }
    absl::Status r = Reconnect(std::min(deadline, absl::Now() + resume_window_));
    if (!r.ok()) {
      return absl::UnavailableError(absl::StrCat(
          b.status().message(), "; reconnecting to ", socket_path_,
          " failed: ", r.ToString()));
    }
  }
}

absl::StatusOr<std::vector<std::string>> Session::DescribeSamples(
    const std::vector<uint64_t>& indices) {
  STOKER_ASSIGN_OR_RETURN(v1::DescribeSamplesResponse resp, core_->Describe(indices));
  return std::vector<std::string>(resp.paths().begin(), resp.paths().end());
}

absl::StatusOr<v1::DescribeSamplesResponse> Session::Describe(
    const std::vector<uint64_t>& indices) {
  return core_->Describe(indices);
}

absl::Status Session::FailedSamplesError(const Batch& b) {
  std::vector<uint64_t> failed;
  for (uint32_t i = 0; i < b.samples(); ++i) {
    if (b.status()[i] != shm::kSampleOk) failed.push_back(b.indices()[i]);
  }
  absl::StatusOr<std::vector<std::string>> paths = DescribeSamples(failed);
  std::string names;
  for (size_t k = 0; k < failed.size() && k < 5; ++k) {
    absl::StrAppend(&names, k ? ", " : "", paths.ok() ? (*paths)[k] : "",
                    paths.ok() ? " " : "", "(sample ", failed[k], ")");
  }
  return absl::DataLossError(absl::StrCat(
      failed.size(), " sample(s) of epoch ", b.epoch(), " batch ",
      b.batch_index(), " could not be read or decoded: ", names,
      failed.size() > 5 ? ", ..." : "", " (see the daemon's log for why)"));
}

// The daemon died, or is restarting: worth reconnecting. A session closed
// on purpose (by this client, the daemon's owner or an error) is not.
bool Session::Resumable(const absl::Status& s) const {
  if (s.code() != absl::StatusCode::kUnavailable || resume_window_ <= absl::ZeroDuration()) {
    return false;
  }
  const uint32_t reason = core_->ring().close_reason();
  return reason == shm::kOpen || reason == shm::kClosedByShutdown;
}

absl::Status Session::Reconnect(absl::Time deadline) {
  v1::SessionSpec spec = spec_;
  if (delivered_any_) {
    uint64_t epoch = last_epoch_, batch = last_batch_ + 1;
    if (const uint64_t per = batches_per_epoch(); per != 0 && batch >= per) {
      ++epoch;
      batch = 0;
    }
    // The start epoch is read from its start position; later ones whole.
    if (epoch != spec.start_epoch()) spec.set_start_position(0);
    spec.set_start_epoch(epoch);
    spec.set_start_batch(batch);
  }
  absl::Duration backoff = absl::Milliseconds(100);
  absl::Status last = absl::DeadlineExceededError("no time left to reconnect");
  while (absl::Now() < deadline) {
    auto client = Client::Connect(
        socket_path_, std::min(absl::Seconds(2), deadline - absl::Now()));
    if (client.ok()) {
      auto fresh = (*client)->OpenSession(spec);
      if (fresh.ok()) {
        core_ = std::move((*fresh)->core_);  // The old ring stays mapped for
        (*fresh)->closed_ = true;            // batches still held.
        next_sequence_ = 0;
        if (share_ >= 0) SetCpuShare(share_);
        ++reconnects_;
        return absl::OkStatus();
      }
      last = fresh.status();
    } else {
      last = client.status();
    }
    // Only a daemon that is not (yet) there is worth waiting for.
    if (last.code() != absl::StatusCode::kUnavailable) return last;
    absl::SleepFor(std::min(backoff, deadline - absl::Now()));
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
  return last;
}

absl::StatusOr<Batch> Session::NextFromRing(absl::Duration timeout, uint64_t last_epoch) {
  shm::RingConsumer& ring = core_->ring();
  const uint64_t t0 = shm::MonotonicNanos();
  SessionCore* core = core_.get();
  shm::SlotSnapshot snapshot;
  absl::StatusOr<int> slot = ring.Acquire(
      next_sequence_, timeout, [core] { return core->Liveness(); }, &snapshot, last_epoch);
  // Time blocked here is the starvation signal the daemon reports.
  ring.AddWait(shm::MonotonicNanos() - t0);
  if (!slot.ok()) return slot.status();
  shm::SlabRingReader* slabs = core_->slabs();
  if (slabs != nullptr) {  // Published after its slab was written: no wait.
    if (absl::Status s = slabs->Await(*slot, absl::Now() + absl::Seconds(10)); !s.ok()) {
      // Both given back and the batch passed: a daemon that did not write
      // the slab then meets a release it cannot explain, and says so.
      ++next_sequence_;
      slabs->Release(*slot);
      ring.Release(*slot);
      return absl::DataLossError(absl::StrCat("batch ", next_sequence_ - 1,
                                              " came without its slab: ", s.ToString()));
    }
  }
  ring.CountBatch();
  ++next_sequence_;
  Batch b;
  b.lease_ = Batch::Lease::Take(core_, &ring, slabs, *slot, snapshot);
  if (b.copied() && !copy_warned_) {
    copy_warned_ = true;
    std::fprintf(stderr, "%s\n", Batch::Lease::CopyWarning(id(), ring).c_str());
  }
  return b;
}

absl::Status Session::Close() {
  closed_ = true;
  return core_->Close(kRpcTimeout);
}

// ----------------------------------------------------------------- Client

// A daemon's connection, made afresh when the daemon restarted (see
// DaemonConnection::Stale): a long-lived client (a Loader's, across epochs)
// goes on with the new daemon.
struct Client::Impl {
  explicit Impl(std::shared_ptr<const DaemonConnection> c)
      : socket_path(c->socket_path()), conn(std::move(c)) {}

  std::shared_ptr<const DaemonConnection> Now() {
    absl::MutexLock lock(&mu);
    return conn;
  }
  // `fn(connection)`, and once more on a fresh connection where its error
  // says the daemon is gone or restarted and a fresh one can be had.
  template <typename Fn>
  auto Retrying(Fn fn) -> decltype(fn(std::declval<const DaemonConnection&>())) {
    std::shared_ptr<const DaemonConnection> c = Now();
    auto r = fn(*c);
    if (r.ok() || !c->Stale(StatusOf(r))) return Named(*c, std::move(r));
    absl::StatusOr<std::shared_ptr<const DaemonConnection>> fresh =
        DaemonConnection::Connect(socket_path, kReconnectTimeout);
    if (!fresh.ok()) {  // The first error says more; this one why it stays.
      std::fprintf(stderr, "stoker: reconnecting to %s: %s\n", socket_path.c_str(),
                   fresh.status().ToString().c_str());
      return Named(*c, std::move(r));
    }
    {
      absl::MutexLock lock(&mu);
      if (conn == c) conn = *fresh;
    }
    return Named(**fresh, fn(**fresh));
  }
  static const absl::Status& StatusOf(const absl::Status& s) { return s; }
  template <typename T>
  static absl::Status StatusOf(const absl::StatusOr<T>& r) { return r.status(); }
  // Errors name the socket as the user named it, not its pinned path.
  static absl::Status Named(const DaemonConnection& c, absl::Status s) { return c.Named(s); }
  template <typename T>
  static absl::StatusOr<T> Named(const DaemonConnection& c, absl::StatusOr<T> r) {
    if (r.ok()) return r;
    return c.Named(r.status());
  }

  static constexpr absl::Duration kReconnectTimeout = absl::Seconds(2);
  const std::string socket_path;
  absl::Mutex mu;
  std::shared_ptr<const DaemonConnection> conn ABSL_GUARDED_BY(mu);
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

const std::string& Client::socket_path() const { return impl_->socket_path; }

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(
    const std::string& socket_path, absl::Duration timeout) {
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const DaemonConnection> c,
                          DaemonConnection::Connect(socket_path, timeout));
  return std::unique_ptr<Client>(new Client(std::make_unique<Impl>(std::move(c))));
}

absl::StatusOr<std::unique_ptr<Session>> Client::OpenSession(const v1::SessionSpec& spec) {
  return impl_->Retrying([&](const DaemonConnection& c) { return OpenOn(c, spec); });
}

absl::StatusOr<std::unique_ptr<Session>> Client::OpenOn(const DaemonConnection& c,
                                                         const v1::SessionSpec& spec) {
  STOKER_RETURN_IF_ERROR(c.CheckProtocol());
  v1::OpenSessionRequest req;
  *req.mutable_spec() = spec;
  MakeDatasetPathsAbsolute(req.mutable_spec()->mutable_dataset());
  std::unique_ptr<shm::OpenServer> opener;
  const std::string folder = DatasetFolder(req.spec().dataset());
  const bool remote = IsRemoteSource(req.spec().dataset());
  std::unique_ptr<shm::OpenServer> signer;
  if (remote) {
    // Named by URL: the data is in an object store, read with this
    // trainer's own access as its environment gives it; the daemon has
    // each request signed here, and never holds the secret. Each signature
    // takes the credentials as they are then (refreshed before they expire).
    STOKER_ASSIGN_OR_RETURN(TrainerObjectStore store, ObjectStoreAccessFromEnvironment());
    *req.mutable_object_store() = store.access;
    if (store.credentials != nullptr) {
      if (c.token().empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the daemon at ", c.socket_path(), " has no ring socket, through which this "
            "client signs its object store requests"));
      }
      STOKER_ASSIGN_OR_RETURN(
          signer, ServeSessionSigner(c.ring_socket(),
                                     req.spec().dataset().s3(), req.mutable_object_store(),
                                     std::move(store.credentials)));
    }
  }
  if (!c.token().empty() && !folder.empty()) {
    // Hand the daemon the dataset's folder (an object store dataset's: its
    // local manifest's, if any) and an opener: it reads only what this
    // process opens for it beneath that folder, with its rights.
    STOKER_ASSIGN_OR_RETURN(shm::ServedFolder served, shm::ServeFolder(folder));
    absl::StatusOr<std::string> root_token = shm::ProveDatasetFolder(
        c.ring_socket(), served.folder_fd, served.channel_fd);
    close(served.folder_fd);
    close(served.channel_fd);
    if (!root_token.ok()) return root_token.status();
    req.mutable_spec()->mutable_dataset()->set_root_token(*root_token);
    opener = std::move(served.server);
  }
  req.set_client_pid(static_cast<uint32_t>(getpid()));
  req.set_client_version(kVersion);
  req.set_client_protocol(kProtocol);
  v1::Placement* where = req.mutable_spec()->mutable_placement();
  if (where->cpus_size() == 0 && !where->has_node()) {
    // The daemon decodes on the NUMA node of the CPUs this process runs on.
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
      for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &set)) where->add_cpus(c);
      }
    }
  }
  v1::OpenSessionResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(kOpenTimeout));
  Identify(&ctx, c.token());
  const std::shared_ptr<v1::Stoker::Stub> stub = c.Stub();
  STOKER_RETURN_IF_ERROR(FromGrpc(stub->OpenSession(&ctx, req, &resp)));
  auto ring = MapRing(spec, resp, c.ring_socket());
  if (!ring.ok()) {
    CloseOn(c, resp.session_id()).IgnoreError();
    return ring.status();
  }
  // An object store's samples are no files of this machine: its opener
  // (a local manifest's) served the opening alone; its signer serves the
  // whole session.
  if (remote) opener = std::move(signer);
  auto core = std::make_shared<SessionCore>(stub, c.token(), resp,
                                            *std::move(ring), std::move(opener));
  if (absl::Status s = core->StartAttach(); !s.ok()) {
    CloseOn(c, resp.session_id()).IgnoreError();
    return s;
  }
  return std::unique_ptr<Session>(
      new Session(std::move(core), c.socket_path(), spec));
}

absl::Status Client::CloseOn(const DaemonConnection& c, uint64_t session_id) {
  v1::CloseSessionRequest req;
  req.set_session_id(session_id);
  return Call(c.Stub().get(), c.token(), &v1::Stoker::Stub::CloseSession, req).status();
}

absl::StatusOr<v1::DaemonStats> Client::GetStats() {
  absl::StatusOr<v1::GetStatsResponse> r = impl_->Retrying([](const DaemonConnection& c) {
    return Call(c.Stub().get(), c.token(), &v1::Stoker::Stub::GetStats, v1::GetStatsRequest());
  });
  if (!r.ok()) return r.status();
  return std::move(*r->mutable_daemon());
}

absl::StatusOr<v1::WarmCacheResponse> Client::WarmCache(
    const v1::WarmCacheRequest& request) {
  return impl_->Retrying([&](const DaemonConnection& c) {
    return Call(c.Stub().get(), c.token(), &v1::Stoker::Stub::WarmCache, request);
  });
}

absl::Status Client::CloseSession(uint64_t session_id) {
  return CloseOn(*impl_->Now(), session_id);  // A restarted daemon has no such session.
}

absl::StatusOr<v1::ResizePoolResponse> Client::ResizePool(
    const std::string& pool, uint32_t threads, int node) {
  v1::ResizePoolRequest req;
  req.set_pool(pool);
  req.set_threads(threads);
  if (node >= 0) req.set_node(node);
  return impl_->Retrying([&](const DaemonConnection& c) {
    return Call(c.Stub().get(), c.token(), &v1::Stoker::Stub::ResizePool, req);
  });
}

absl::StatusOr<v1::ListSessionsResponse> Client::ListSessions() {
  return impl_->Retrying([](const DaemonConnection& c) {
    return Call(c.Stub().get(), c.token(), &v1::Stoker::Stub::ListSessions,
                v1::ListSessionsRequest());
  });
}

absl::Status Client::CheckHealth() {
  return impl_->Retrying([](const DaemonConnection& c) {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(absl::Seconds(5)));
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    STOKER_RETURN_IF_ERROR(FromGrpc(c.health().Check(&ctx, req, &resp)));
    if (resp.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
      return absl::UnavailableError(absl::StrCat("daemon health is ", resp.status()));
    }
    return absl::OkStatus();
  });
}

}  // namespace stoker
