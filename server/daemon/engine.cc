#include "server/daemon/engine.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/pool/topology.h"
#include "server/sources/source.h"
#include "util/cache_key.h"
#include "util/cancellation.h"
#include "util/log.h"
#include "util/status_macros.h"

namespace stoker {
namespace {

// The thread pool group volume decodes' chunks run in (sessions' groups are
// their ids, from 1).
constexpr uint64_t kVolumeDecodeGroup = UINT64_MAX;

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

// Sources' kept values (listings) in L2, under keys of their own; a kept
// value's version is none (its key names what it lists).
class L2Kept : public KeptValues {
 public:
  explicit L2Kept(L2Cache* l2) : l2_(l2) {}
  bool Get(const std::string& key,
           const std::function<void(absl::string_view value)>& take) override {
    return l2_->Lookup(CacheKey({"kept", key}), FileVersion{}, take) == L2Cache::Result::kHit;
  }
  void Put(const std::string& key, std::string value, int64_t owner) override {
    l2_->Put(CacheKey({"kept", key}), FileVersion{},
             std::make_shared<const std::string>(std::move(value)), owner);
  }

 private:
  L2Cache* const l2_;
};

std::string NodeCount(const Topology& t) {
  return absl::StrCat(t.size(), t.size() == 1 ? " node" : " nodes");
}

}  // namespace

Engine::Engine(const DaemonOptions& options)
    : options_(options),
      l1_("l1", options_.l1_bytes),
      decoded_cache_("decoded", options_.decoded_cache_bytes),
      // A picture may take a quarter of the pixel cache.
      pixel_ram_("pixels", options_.pixel_cache_bytes, 16, options_.pixel_cache_bytes / 4),
      pixel_shares_(options_.pixel_cache_bytes),
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
      reads_in_flight_(options_.max_read_bytes_in_flight,
                       std::max<uint64_t>(options_.max_read_bytes_in_flight / 2, 1)),
      decodes_in_flight_(options_.max_decode_bytes_in_flight,
                         std::max<uint64_t>(options_.max_decode_bytes_in_flight / 2, 1)) {}

Engine::~Engine() {
  Stop();
  // Pools run what is queued, then join; L2 writes what is queued.
  reader_pool_.reset();
  decode_pools_.reset();
  kept_.reset();
  l2_.reset();
}

absl::Status Engine::Start() {
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
    STOKER_ASSIGN_OR_RETURN(l2_, L2Cache::Open(options_.l2));
    kept_ = std::make_unique<L2Kept>(l2_.get());
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
  pixels_ = std::make_unique<PixelCache>(&pixel_ram_, l2_.get());
  if (!options_.object_store_endpoints.empty() || options_.object_store_own_endpoints) {
    S3Client::Options o;
    STOKER_ASSIGN_OR_RETURN(o.endpoints,
                            EndpointAllowList::Parse(options_.object_store_endpoints));
    if (options_.object_store_own_endpoints) o.endpoints.AllowAdmins();
    o.deadline = options_.object_store_deadline;
    o.low_speed_bytes = options_.object_store_low_speed_bytes;
    o.low_speed_time = options_.object_store_low_speed_time;
    STOKER_ASSIGN_OR_RETURN(objects_, S3Client::Create(std::move(o)));
  }
  fetcher_ = std::make_unique<SampleFetcher>(&l1_, l2_.get(), options_.reader_threads,
                                             &reads_in_flight_, options_.max_file_bytes);
  reader_pool_ = std::make_unique<ThreadPool>("stoker-io", options_.reader_threads);
  // One user's reads blocked on a slow store hold at most this many.
  reader_pool_->SetUserCap(options_.max_reader_threads_per_user > 0
                               ? options_.max_reader_threads_per_user
                               : DefaultReaderCap(options_.reader_threads));
  warmer_ = std::make_unique<CacheWarmer>(
      [pool = reader_pool_.get()](std::function<void()> task) { pool->Schedule(std::move(task)); },
      [fetcher = fetcher_.get()](const Dataset& ds, const std::string& file, bool* from_source) {
        // Warm-ups are admins': their entries are the daemon's own.
        return fetcher->Warm(ds, file, L2Cache::kNobody, from_source);
      });
  const int threads = options_.decode_threads > 0 ? options_.decode_threads
                                                 : topology.total_cpus();
  // A decode thread out of work gives back the large buffers it kept.
  decode_pools_ = std::make_unique<NodePools>("stoker-dec", topology, pinned, threads,
                                              options_.numa_spill, &TrimDecodeScratch);
  // Volumes filled chunk by chunk fill the rest on producers whose rings
  // are full (server/pool/idle_work.h).
  volumes_.set_background([this](std::function<void()> task) { idle_.Post(std::move(task)); });
  for (int n = 0; pinned && n < topology.size(); ++n) {
    LogInfo(absl::StrCat("decode pool of node ", n, ": CPUs ",
                         FormatCpuList(topology.nodes()[n].cpus), ", ",
                         decode_pools_->pool(n).size(), " threads"));
  }
  return absl::OkStatus();
}

void Engine::Stop() {
  CancelScans();
  background_.Stop();  // Streamed openings, which stop at the flag above.
  idle_.Stop();  // No producer is left to run it.
  if (warmer_) warmer_->Stop();
  // The pools live until the destructor: an OpenSession racing with Stop
  // may still hold them for the session it is about to discard.
}

PipelineContext Engine::Context(int node, int64_t uid, uint64_t generation) {
  return PipelineContext{reader_pool_.get(), decode_pools_.get(), node,
                         fetcher_.get(), &decoded_cache_, pixels_.get(), &counters_,
                         generation, options_.decode_limits, &idle_, uid,
                         &pixel_shares_, &decodes_in_flight_};
}

void Engine::CancelScans() {
  stopping_.store(true);
  std::vector<std::shared_ptr<Cancellation>> cancels;
  {
    absl::MutexLock lock(&cancels_mu_);
    cancels = cancels_.TakeLive();
  }
  for (const auto& cancel : cancels) cancel->Cancel();
}

ScanLimits Engine::ScanLimitsNow() {
  ScanLimits limits = options_.scan_limits;
  limits.cancel = &stopping_;
  limits.background = [this](std::function<void()> work) {
    return background_.Start(std::move(work));
  };
  limits.fs = options_.fs;
  limits.max_file_bytes = options_.max_file_bytes;
  return limits;
}

absl::StatusOr<std::shared_ptr<const Dataset>> Engine::OpenDataset(
    const v1::DatasetSpec& spec, std::shared_ptr<Beneath> beneath, int64_t uid,
    std::shared_ptr<const ObjectStoreAccess> access, std::shared_ptr<OpeningProgress> progress,
    bool streamed) {
  if (beneath != nullptr) {
    beneath->charge_held = [this, uid](uint64_t n) { return held_files_.Charge(uid, n); };
  }
  // The session's object reads end with it (Dataset::reads_cancel), or
  // when the daemon stops.
  auto reads_cancel = std::make_shared<Cancellation>();
  {
    absl::MutexLock lock(&cancels_mu_);
    cancels_.Add(reads_cancel);
  }
  if (stopping_.load()) reads_cancel->Cancel();
  if (access != nullptr) {
    auto cancellable = std::make_shared<ObjectStoreAccess>(*access);
    cancellable->cancel = reads_cancel;
    access = std::move(cancellable);
  }
  SourceContext ctx;
  ctx.limits = ScanLimitsNow();
  ctx.beneath = std::move(beneath);
  ctx.charge = [this, uid](uint64_t bytes) { return array_ram_.Charge(uid, bytes); };
  ctx.limits.charge_list = [this, uid](uint64_t bytes) { return list_ram_.Charge(uid, bytes); };
  ctx.limits.progress = progress.get();
  ctx.limits.progress_owner = std::move(progress);  // A streamed opening keeps it.
  ctx.volumes = &volumes_;
  ctx.uid = uid;
  ctx.objects = objects_.get();
  ctx.access = std::move(access);
  ctx.kept = kept_.get();
  ctx.read_ahead.keep = [this, uid](const SourceKey& id, std::string bytes) {
    fetcher_->Keep(id, std::make_shared<const std::string>(std::move(bytes)), uid);
  };
  // Half of L1: more would push out what it kept first (and L2's write
  // queue, bounded by entries, holds what it queues in RAM until written).
  ctx.read_ahead.most_bytes = options_.l1_bytes / 2;
  ctx.limits.streamed = streamed;
  STOKER_ASSIGN_OR_RETURN(Dataset ds, stoker::OpenDataset(spec, ctx));
  ds.reads_cancel = std::move(reads_cancel);
  return std::make_shared<const Dataset>(std::move(ds));
}

std::shared_ptr<const FileGuard> Engine::Guard() const {
  auto g = std::make_shared<FileGuard>();
  if (geteuid() != 0) g->daemon_uid = geteuid();
  struct stat st {};
  if (stat("/dev/shm", &st) == 0) g->devices.push_back(st.st_dev);
  auto add = [&](const std::string& path) {
    if (!path.empty() && stat(path.c_str(), &st) == 0) {
      g->inodes.emplace_back(st.st_dev, st.st_ino);
    }
  };
  if (!options_.l2.path.empty()) {
    add(options_.l2.path);
    add(options_.l2.path + "/data.mdb");
    add(options_.l2.path + "/lock.mdb");
  }
  if (!options_.handoff_socket.empty()) {
    const size_t slash = options_.handoff_socket.rfind('/');
    if (slash != std::string::npos && slash > 0) add(options_.handoff_socket.substr(0, slash));
  }
  return g;
}

void Engine::AddStats(v1::DaemonStats* s) const {
  s->set_samples_decoded(counters_.samples_decoded.load(std::memory_order_relaxed));
  *s->mutable_reader() = fetcher_ ? fetcher_->Stats() : v1::ReaderStats();
  *s->mutable_read_latency() = counters_.fetch.Snapshot();
  *s->mutable_decode_latency() = counters_.decode.Snapshot();
  *s->mutable_transform_latency() = counters_.transform.Snapshot();
  s->set_samples_failed_read(counters_.samples_failed_read.load(std::memory_order_relaxed));
  s->set_samples_failed_decode(
      counters_.samples_failed_decode.load(std::memory_order_relaxed));
  s->set_samples_failed(s->samples_failed_read() + s->samples_failed_decode());
  s->set_bytes_read(s->reader().source_bytes());
  if (objects_) {
    const S3Client::Stats o = objects_->stats();
    v1::ObjectStoreStats* out = s->mutable_object_store();
    out->set_requests(o.requests);
    out->set_retries(o.retries);
    out->set_failures(o.failures);
    out->set_bytes(o.bytes);
    out->set_throttles(o.throttles);
    out->set_in_flight_limit(static_cast<uint32_t>(o.in_flight_limit));
  }
  *s->add_tiers() = l1_.Stats();
  if (l2_) {
    *s->add_tiers() = l2_->Stats();
  } else {
    s->add_tiers()->set_tier("l2");  // enabled = false
  }
  *s->add_tiers() = decoded_cache_.Stats();
  *s->add_tiers() = pixel_ram_.Stats();
  s->set_pixel_cache_decodes(pixels_ ? pixels_->decodes() : 0);
  *s->add_tiers() = volumes_.Stats();
  s->set_volume_cache_decodes(volumes_.decodes());
  s->set_volume_cache_chunks(volumes_.pieces());
  s->set_volume_cache_idle_chunks(volumes_.background_pieces());
  s->set_volume_cache_oversized(volumes_.oversized());
  s->set_volume_cache_spilled(volumes_.spilled());
  s->set_volume_cache_unspilled(volumes_.unspilled());
  s->set_batches_published(counters_.batches_published.load(std::memory_order_relaxed));
}

}  // namespace stoker
