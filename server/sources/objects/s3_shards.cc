#include "server/sources/objects/s3_shards.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <map>
#include <memory>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "proto/kept.pb.h"
#include "server/dataset/dataset_growth.h"
#include "server/dataset/sample_source.h"
#include "server/sources/objects/s3_lister.h"
#include "server/sources/objects/s3_shard_index.h"
#include "server/sources/objects/s3_shard_list.h"
#include "server/sources/objects/s3_shard_members.h"
#include "server/sources/shards/shard_assembly.h"
#include "server/sources/shards/tar_index.h"
#include "server/sources/shards/webdataset.h"
#include "util/cache_key.h"
#include "util/log.h"
#include "util/status_macros.h"

namespace stoker {
namespace {

// Shards indexed at once. A streamed opening takes fewer: enough to
// outrun decoding them, few enough that each arrives soon (a store shares
// its bandwidth among what is in flight), so windows come in order.
constexpr int kShardsAtOnce = 16;
constexpr int kStreamedShardsAtOnce = 4;
// A streamed opening's first shards (its first two windows), indexed before
// any other so that the session begins as soon as it can.
constexpr size_t kFirstShards = 3;
constexpr absl::Duration kProgressEvery = absl::Seconds(5);

using Shard = ListedShard;

// One opening's indexing of every shard, several at once, each shard's
// samples handed to the assembly as it is done. Owns copies of all it
// uses: a streamed opening runs on after OpenS3Shards returned.
class ShardOpening {
 public:
  ShardOpening(const S3Url& url, std::string pattern, const ObjectStoreAccess& access,
               ObjectStore* client, const ScanLimits& limits, const KeptListing& keep,
               const ReadAhead& ahead, std::vector<std::string> members,
               std::vector<Shard> shards, std::shared_ptr<S3ShardMembers> source,
               std::shared_ptr<DatasetGrowth> growth, FirstBlock first)
      : url_(url),
        pattern_(std::move(pattern)),
        access_(access),
        client_(client),
        limits_(limits),
        keep_(keep),
        ahead_(ahead),
        members_(std::move(members)),
        shards_(std::move(shards)),
        source_(std::move(source)),
        growth_(std::move(growth)),
        start_(absl::Now()),
        own_(start_),
        progress_(limits.progress != nullptr ? *limits.progress : own_),
        ix_{url_, access_, client_, limits_, ahead_, members_, &progress_},
        assembly_(
            shards_.size(),
            [in = absl::StrCat("s3://", url.bucket, "/"), this](
                uint32_t k, uint64_t offset, uint64_t size, const std::string& kept) {
              return ShardMemberName(absl::StrCat(in, shards_[k].key, "#"), offset, size, kept);
            },
            members_, limits_, growth_.get()),
        logged_(absl::ToUnixNanos(start_)),
        progressed_(absl::ToUnixNanos(start_)),
        first_(std::move(first)) {
    ix_.check = [this] { return Check(); };
    if (!first_.key.empty()) {  // Its request is the opening's, taken or not.
      ix_.requests.fetch_add(1);
      ix_.bytes.fetch_add(first_.block.size());
    }
  }

  std::string description() const {
    return absl::StrCat("s3-shards:", url_.ToString(), pattern_.empty() ? "" : " ", pattern_,
                        " at ", access_.endpoint.ToString());
  }
  const ShardAssembly& assembly() const { return assembly_; }
  uint64_t requests() const { return ix_.requests.load(); }
  uint64_t bytes() const { return ix_.bytes.load(); }

  // Indexes every shard; the end goes to the assembly (and the growth).
  absl::Status Run(Dataset* ds) {
    uint64_t total_bytes = 0;
    for (const Shard& s : shards_) total_bytes += s.size;
    progress_.Shards(shards_.size(), total_bytes);
    std::vector<absl::Status> errors(shards_.size());
    std::atomic<size_t> next{0};
    auto index = [&](size_t end) {
      for (size_t i; (i = next.fetch_add(1)) < end;) {
        errors[i] = IndexOne(i);
        done_.fetch_add(1);
        progress_.ShardDone();
        if (!errors[i].ok()) {  // The first error ends it.
          ix_.failed.store(true);
          next.store(shards_.size());
        }
      }
    };
    // Streamed: the first windows' shards first, so that they do not share
    // the store with later ones: the session begins with them.
    if (limits_.streamed) {
      const size_t first = std::min<size_t>(kFirstShards, shards_.size());
      RunOnThreads(first, [&] { index(first); });
      if (!ix_.failed.load()) next.store(first);  // index() took them past its end.
    }
    RunOnThreads(std::min<int>(limits_.streamed ? kStreamedShardsAtOnce : kShardsAtOnce,
                               shards_.size()),
                 [&] { index(shards_.size()); });
    // A shard's own error, not another's stopping for it.
    absl::Status status;
    for (const absl::Status& e : errors) {
      if (!e.ok() && (status.ok() || status.code() == absl::StatusCode::kCancelled)) status = e;
    }
    if (const size_t indexed = read_.load(); status.ok() && indexed > 0) {
      LogInfo(absl::StrCat(url_.ToString(), ": indexed ", indexed, " of ", shards_.size(),
                           " shards (", ix_.bytes.load() >> 20, " MiB) in ",
                           absl::FormatDuration(absl::Trunc(absl::Now() - start_,
                                                            absl::Milliseconds(1)))));
    }
    growth_->SetReads(ix_.requests.load(), ix_.bytes.load());
    return assembly_.Finish(status, url_.ToString(), ds);
  }

 private:
  absl::Status Check() {
    // Progress every few seconds, from whichever reader passes then.
    const absl::Time now = absl::Now();
    int64_t last = logged_.load();
    if (now - absl::FromUnixNanos(last) >= kProgressEvery &&
        logged_.compare_exchange_strong(last, absl::ToUnixNanos(now))) {
      LogInfo(absl::StrCat("indexing ", progress_.Summary(url_.ToString(), now)));
    }
    if (ix_.failed.load()) return absl::CancelledError("another shard failed");
    if (limits_.cancel != nullptr && limits_.cancel->load()) {
      return absl::CancelledError("the daemon is shutting down");
    }
    if (growth_->cancelled()->load()) return absl::CancelledError("the session ended");
    // Indexing reads every shard whole, so its time grows with the data:
    // the scan timeout bounds a stall (no block or shard done for that
    // long), not the whole.
    // (The time is stored before the mark: a thread that sees the new mark
    // sees a time no older than it.)
    if (const uint64_t mark = ix_.bytes.load() + done_.load(); mark != progress_mark_.load()) {
      progressed_.store(absl::ToUnixNanos(now));
      progress_mark_.store(mark);
    }
    if (now > absl::FromUnixNanos(progressed_.load()) + limits_.max_time) {
      return absl::DeadlineExceededError(absl::StrCat(
          "indexing made no progress (no 8 MiB block or shard done) for ",
          absl::FormatDuration(limits_.max_time), " (--dataset-scan-timeout)"));
    }
    return absl::OkStatus();
  }

  std::string KeptKey(const Shard& s) const {
    return CacheKey({"s3-shard-index/2", access_.endpoint.ToString(), url_.bucket, s.key, s.etag,
                     s.size,
                     access_.credentials != nullptr ? access_.credentials->access_key_id : "",
                     absl::StrJoin(members_, ",")});
  }

  // Shard i's index, kept or read, handed to the assembly.
  absl::Status IndexOne(size_t i) {
    const Shard& shard = shards_[i];
    // The block asked for beside the listing, freed whichever way this
    // shard is indexed (only this shard's thread touches it).
    const bool preloaded = first_.Fits(shard);
    std::string first_block;
    if (shard.key == first_.key) first_block = std::exchange(first_.block, std::string());
    if (keep_.values != nullptr && !keep_.refresh) {
      kept::ShardIndex index;
      bool taken = false;
      absl::Status charged;
      uint64_t kept_bytes = 0;
      keep_.values->Get(KeptKey(shard), [&](absl::string_view value) {
        // Charged before it is parsed (a parsed index takes at least as
        // much), and the rest once parsed.
        kept_bytes = value.size();
        charged = ix_.Charge(value.size());
        taken = charged.ok() && value.size() <= INT_MAX &&
                index.ParseFromArray(value.data(), static_cast<int>(value.size())) &&
                KeptIndexFits(index, shard, members_.size());
      });
      if (!charged.ok()) return charged;
      if (taken) {
        const uint64_t n = index.samples_size();
        // Parsed, its members take more than their bytes kept.
        const uint64_t parsed = ShardIndexBytes(n, members_.size());
        if (absl::Status c = ix_.Charge(parsed - std::min<uint64_t>(parsed, kept_bytes));
            !c.ok()) {
          return c;
        }
        // Its tar members, as reading it counts them (each sample has one).
        const uint64_t m = std::max<uint64_t>(index.members(), n);
        if (ix_.members.fetch_add(m) + m > limits_.max_files) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "over ", limits_.max_files, " members in all (--max-dataset-files)"));
        }
        progress_.Skipped(shard.size);  // Not to be read: out of the time left.
        return Named(shard, assembly_.Add(i, std::move(index)));
      }
    }
    absl::StatusOr<kept::ShardIndex> index =
        IndexShard(ix_, shard, preloaded ? &first_block : nullptr);
    if (!index.ok()) return Named(shard, index.status());
    source_->Proven(static_cast<uint32_t>(i));
    read_.fetch_add(1);
    if (keep_.values != nullptr) {
      keep_.values->Put(KeptKey(shard), index->SerializeAsString(), access_.owner);
    }
    return Named(shard, assembly_.Add(i, *std::move(index)));
  }

  absl::Status Named(const Shard& shard, absl::Status s) const {
    if (s.ok()) return s;
    return absl::Status(s.code(), absl::StrCat("s3://", url_.bucket, "/", Shown(shard.key), ": ",
                                               s.message()));
  }

  const S3Url url_;
  const std::string pattern_;
  const ObjectStoreAccess access_;
  ObjectStore* const client_;
  const ScanLimits limits_;
  const KeptListing keep_;
  const ReadAhead ahead_;
  const std::vector<std::string> members_;  // Each sample keeps (S3Source.members).
  const std::vector<Shard> shards_;
  const std::shared_ptr<S3ShardMembers> source_;
  // Held while it writes; the dataset's handle cancels it (CancelOnDrop).
  const std::shared_ptr<DatasetGrowth> growth_;
  const absl::Time start_;
  OpeningProgress own_;          // Counted where the caller sees it, else here
  OpeningProgress& progress_;    // (for the log alone).
  ShardIndexing ix_;
  ShardAssembly assembly_;
  std::atomic<int64_t> logged_;
  std::atomic<size_t> read_{0};  // Shards indexed by reading them.
  std::atomic<size_t> done_{0};  // Shards indexed, read or kept.
  // The indexing's last progress (bytes read plus shards done) and when it
  // was seen (Unix ns): the scan timeout bounds the time between.
  std::atomic<uint64_t> progress_mark_{0};
  std::atomic<int64_t> progressed_;
  FirstBlock first_;  // IndexOne(0)'s, where it fits.
};

}  // namespace

absl::StatusOr<Dataset> OpenS3Shards(const S3Url& url, const ShardNames& named,
                                     const ObjectStoreAccess& access, ObjectStore* client,
                                     const ScanLimits& limits, const KeptListing& keep,
                                     const ReadAhead& ahead, std::vector<ListedObject>* given) {
  FirstBlock first;
  std::atomic<bool> stop_asking{false};
  std::thread asking;
  if (limits.streamed && !named.pattern.empty() && named.names == nullptr) {
    absl::StatusOr<ShardPattern> p = ShardPattern::Parse(named.pattern, limits.max_files);
    if (p.ok() && p->size() > 0) {
      first.key = ShardPrefix(url) + p->Name(0);
      try {
        asking = std::thread([&first, &url, &access, &limits, &stop_asking, client] {
          first.read = client->Get(access, S3Url{url.bucket, first.key}, 0, kShardBlockBytes,
                                   "", &first.block, &first.seen, [&] {
                                     return stop_asking.load() ||
                                            (limits.cancel != nullptr && limits.cancel->load());
                                   })
                           .ok();
        });
      } catch (const std::system_error&) {
        first.key.clear();  // Not asked for: read as any shard is.
      }
    }
  }
  // The block's thread is joined on every way out, a throw included; told
  // to stop where the listing failed.
  auto listed = [&]() -> absl::StatusOr<std::vector<Shard>> {
    try {
      return ListShards(url, named, access, client, limits, given);
    } catch (...) {
      stop_asking.store(true);
      if (asking.joinable()) asking.join();
      throw;
    }
  }();
  if (!listed.ok()) stop_asking.store(true);
  if (asking.joinable()) asking.join();
  if (!listed.ok()) return listed.status();
  std::vector<uint64_t> bytes;
  for (const Shard& s : *listed) bytes.push_back(s.size);
  const size_t windows = WindowOfShard(listed->size() - 1, true) + 1;
  const uint64_t capacity = ShardCapacity(bytes, limits.max_files);
  auto growth = std::make_shared<DatasetGrowth>(capacity, windows);
  auto source = std::make_shared<S3ShardMembers>(client, access, url.bucket,
                                                 limits.max_file_bytes, *listed);
  ScanLimits scan = limits;
  scan.streamed = limits.streamed && windows > 1;  // One window is all or nothing.
  // The opening may outlive this call: nothing of the caller's file
  // environment goes with it (no shard is a local file).
  scan.within = nullptr;
  scan.fs = nullptr;
  auto opening = std::make_shared<ShardOpening>(
      url, named.pattern.empty() ? named.manifest : named.pattern, access, client, scan,
      keep, ahead, named.members, *listed, source, growth, std::move(first));
  Dataset ds;
  ds.description = opening->description();
  ds.source = source;
  if (!scan.streamed) {
    STOKER_RETURN_IF_ERROR(opening->Run(&ds));
    ds.read_ahead_requests = opening->requests();
    ds.read_ahead_bytes = opening->bytes();
    return ds;
  }
  // Streamed: answered once a window holds samples; the rest comes.
  auto work = [opening, growth] {
    Dataset unused;
    if (!RunLoggingExceptions("indexing shards", [&] { opening->Run(&unused).IgnoreError(); })) {
      growth->Finish(absl::InternalError("indexing the shards failed (the daemon's log says why)"));
    }
  };  // The growth's end says how it ended.
  absl::StatusOr<std::shared_ptr<DatasetGrowth>> handle =
      GrowInBackground(growth, limits, std::move(work), "the shards' indexing");
  if (!handle.ok()) return handle.status();
  const DatasetGrowth::View v = growth->Now();
  // The first window's: the rest are counted as the session's when it ends.
  ds.read_ahead_requests = opening->requests();
  ds.read_ahead_bytes = opening->bytes();
  ds.member_files = opening->assembly().member_files();
  ds.files_per_sample = static_cast<uint32_t>(ds.member_files.size());
  ds.skipped_files = opening->assembly().skipped();
  // The size to plan caches for: the published windows' samples per byte,
  // at most the capacity (the listing's sizes are the store's word).
  double published_bytes = 0, total_bytes = 0;
  for (size_t k = 0; k < listed->size(); ++k) {
    total_bytes += (*listed)[k].size;
    if (WindowOfShard(k, true) < v.windows.size()) published_bytes += (*listed)[k].size;
  }
  uint64_t published = 0;
  for (uint64_t w : v.windows) published += w;
  const double expected = published * total_bytes / std::max(1.0, published_bytes);
  growth->SetExpected(static_cast<uint64_t>(std::min(expected, static_cast<double>(capacity))));
  ds.growth = *std::move(handle);
  return ds;
}

}  // namespace stoker
