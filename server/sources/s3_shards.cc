#include "server/sources/s3_shards.h"

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
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "proto/kept.pb.h"
#include "server/dataset/dataset_growth.h"
#include "server/dataset/sample_source.h"
#include "server/sources/s3_lister.h"
#include "server/sources/s3_shard_list.h"
#include "server/sources/s3_shard_members.h"
#include "server/sources/shard_assembly.h"
#include "server/sources/tar_index.h"
#include "server/sources/webdataset.h"
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
// One ranged GET of a shard being indexed.
constexpr uint64_t kBlockBytes = uint64_t{8} << 20;
constexpr absl::Duration kProgressEvery = absl::Seconds(5);

using Shard = ListedShard;

// A pattern's first shard's first block, asked for beside the listing by a
// streamed opening (the session's first batch needs it): taken only where
// the listing names the version it read, so the first batch comes a round
// trip sooner.
struct FirstBlock {
  std::string key;  // "": none asked for.
  std::string block;
  ObjectVersion seen;
  bool read = false;

  bool Fits(const Shard& shard) const {
    return read && shard.key == key && IsListedVersion(seen, shard.size, shard.etag) &&
           block.size() == std::min(kBlockBytes, shard.size);
  }
};

// A shard read forward, a block at a time, as the caller, at its listed
// version: what ForEachTarMember and the members' bytes are read from.
class ShardStream {
 public:
  // `fetched` and `progress` count the bytes read.
  ShardStream(const S3Url& object, const Shard& shard, const ObjectStoreAccess& access,
              S3Client* client, const std::function<absl::Status()>& check,
              std::atomic<uint64_t>* fetched, std::atomic<uint64_t>* requests,
              OpeningProgress* progress)
      : object_(object),
        shard_(shard),
        access_(access),
        client_(client),
        check_(check),
        fetched_(fetched),
        requests_(requests),
        progress_(progress) {}

  // The shard's first block, read already (its version checked): counted
  // as read now.
  void Preload(std::string block) {
    block_ = std::move(block);
    at_ = 0;
    progress_->Read(block_.size());
  }

  absl::Status Read(uint64_t offset, size_t n, char* out) {
    while (n > 0) {
      if (offset < at_ || offset >= at_ + block_.size()) {
        if (absl::Status s = Fetch(offset); !s.ok()) return s;
      }
      const size_t piece = std::min<uint64_t>(n, at_ + block_.size() - offset);
      std::copy_n(block_.data() + (offset - at_), piece, out);
      offset += piece;
      out += piece;
      n -= piece;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Fetch(uint64_t offset) {
    if (absl::Status s = check_(); !s.ok()) return s;
    if (offset >= shard_.size) return absl::DataLossError("a read past the shard's end");
    const uint64_t n = std::min(kBlockBytes, shard_.size - offset);
    ObjectVersion seen;
    requests_->fetch_add(1);
    // A GET in flight ends with the opening (its session dropped, the
    // daemon stopping, the deadline, another shard's error).
    absl::Status s = client_->Get(access_.endpoint, object_, offset, n, shard_.etag,
                                  access_.credentials, &block_, &seen, access_.owner,
                                  [this] { return !check_().ok(); });
    if (s.code() == absl::StatusCode::kCancelled) {
      if (absl::Status c = check_(); !c.ok()) return c;
    }
    if (s.code() == absl::StatusCode::kFailedPrecondition ||
        s.code() == absl::StatusCode::kNotFound) {
      return absl::DataLossError(
          absl::StrCat("the shard changed while it was indexed (", s.message(), ")"));
    }
    if (!s.ok()) return s;
    if (block_.size() != n || !IsListedVersion(seen, shard_.size, shard_.etag)) {
      return absl::DataLossError("the shard changed while it was indexed");
    }
    at_ = offset;
    fetched_->fetch_add(n);
    progress_->Read(n);
    return absl::OkStatus();
  }

  const S3Url& object_;
  const Shard& shard_;
  const ObjectStoreAccess& access_;
  S3Client* const client_;
  const std::function<absl::Status()>& check_;
  std::atomic<uint64_t>* const fetched_;
  std::atomic<uint64_t>* const requests_;
  OpeningProgress* const progress_;
  std::string block_;
  uint64_t at_ = 0;
};

// What opening shares across the shards it indexes at once.
struct Indexing {
  const S3Url& root;
  const ObjectStoreAccess& access;
  S3Client* client;
  const ScanLimits& limits;
  const ReadAhead& ahead;
  OpeningProgress* progress;            // Bytes read, as they come.
  std::function<absl::Status()> check;  // Cancellation, the deadline, a failed shard.
  std::atomic<bool> failed{false};      // A shard failed: the others stop.
  std::atomic<uint64_t> bytes{0};       // Read so far, of every shard.
  std::atomic<uint64_t> requests{0};    // GETs that read them.
  std::atomic<uint64_t> members{0};     // Of every shard, against max_files.
  std::atomic<uint64_t> kept_ahead{0};  // Bytes handed to ahead.keep.

  // The indexes' memory, charged to the caller (limits.charge_list) while
  // the opening runs: RESOURCE_EXHAUSTED once the user has no room.
  absl::Status Charge(uint64_t bytes) {
    if (limits.charge_list == nullptr || bytes == 0) return absl::OkStatus();
    std::shared_ptr<void> token = limits.charge_list(bytes);
    absl::MutexLock lock(&mu);
    if (token == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the shards' indexes passed this user's memory for sample lists (",
          charged + bytes, " bytes so far; --max-list-bytes-per-user)"));
    }
    held.push_back(std::move(token));
    charged += bytes;
    return absl::OkStatus();
  }
  absl::Mutex mu;
  std::vector<std::shared_ptr<void>> held ABSL_GUARDED_BY(mu);
  uint64_t charged ABSL_GUARDED_BY(mu) = 0;
};

// What an index holds per sample, as it is charged.
constexpr uint64_t kIndexBytesPerSample = sizeof(kept::ShardIndex::Sample) + 16;

// Reads `shard` whole and indexes it, handing each sample's picture and
// mask to ix.ahead as they stream by.
absl::StatusOr<kept::ShardIndex> IndexShard(Indexing& ix, const Shard& shard,
                                             std::string* first_block = nullptr) {
  const S3Url object{ix.root.bucket, shard.key};
  ShardStream stream(object, shard, ix.access, ix.client, ix.check, &ix.bytes, &ix.requests,
                     ix.progress);
  if (first_block != nullptr) stream.Preload(std::move(*first_block));
  kept::ShardIndex index;
  // The bytes of the members of the sample being grouped, by offset.
  std::map<uint64_t, std::string> pending;
  auto keep = [&](uint64_t offset, uint64_t size) {
    auto it = pending.find(offset);
    if (it == pending.end() || size == 0) return;  // Not read ahead; an empty one is an error.
    SourceKey id{ShardMemberFile(ix.access, ix.root.bucket, shard, offset, size),
                 ObjectFileVersion(shard.size, shard.etag), nullptr};
    ix.ahead.keep(id, std::move(it->second));
  };
  bool image_seen = false;  // The open sample's first picture has streamed by.
  WebDatasetGrouper grouper([&](WebDatasetSample sample) -> absl::Status {
    const auto [image, mask, cls] = FieldsOf(sample);
    if (image == nullptr) {
      index.set_skipped(index.skipped() + 1);
    } else {
      if (index.samples_size() % 1024 == 0) {
        if (absl::Status c = ix.Charge(1024 * kIndexBytesPerSample); !c.ok()) return c;
      }
      kept::ShardIndex::Sample* s = index.add_samples();
      s->set_image_offset(image->offset);
      s->set_image_size(image->size);
      if (mask != nullptr) {
        s->set_has_mask(true);
        s->set_mask_offset(mask->offset);
        s->set_mask_size(mask->size);
      }
      if (cls != nullptr) {
        auto text = pending.find(cls->offset);
        absl::StatusOr<int32_t> label =
            ParseLabel(text == pending.end() ? std::string() : text->second, sample.key);
        if (!label.ok()) return label.status();
        s->set_label(*label);
      }
      keep(image->offset, image->size);
      if (mask != nullptr) keep(mask->offset, mask->size);
    }
    // This sample's members, and members without a key before it.
    pending.erase(pending.begin(), pending.upper_bound(sample.fields.back().offset));
    image_seen = false;
    return absl::OkStatus();
  });
  uint64_t seen = 0;
  absl::Status s = ForEachTarMember(
      [&](uint64_t offset, size_t n, char* out) { return stream.Read(offset, n, out); },
      shard.size, ix.limits.max_files, [&](TarMember m) -> absl::Status {
        if (++seen % 4096 == 0) {
          if (absl::Status c = ix.check(); !c.ok()) return c;
        }
        if (ix.members.fetch_add(1) >= ix.limits.max_files) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "over ", ix.limits.max_files, " members in all (--max-dataset-files)"));
        }
        if (absl::Status a = grouper.Add(m); !a.ok()) return a;
        // What a sample takes, read as it streams by: a label's first
        // bytes (enough to refuse a long one); the first picture and the
        // mask, when small enough and while the read-ahead has room.
        const WebDatasetSample::Field* f = grouper.added();
        if (f == nullptr || !IsUsedField(f->extension)) return absl::OkStatus();
        const bool label = f->extension == "cls", mask = f->extension == "seg.png";
        const bool first_image = !label && !mask && !image_seen;
        image_seen = image_seen || (!label && !mask);
        uint64_t n = 0;
        if (label) {
          n = std::min(m.size, kMaxLabelBytes + 1);
        } else if ((mask || first_image) && ix.ahead.keep != nullptr &&
                   m.size <= std::min(kMostReadAhead, ix.limits.max_file_bytes)) {
          if (ix.kept_ahead.fetch_add(m.size) + m.size <= ix.ahead.most_bytes) {
            n = m.size;
          } else {
            ix.kept_ahead.fetch_sub(m.size);  // Refused: the room stays for smaller ones.
          }
        }
        if (n == 0) return absl::OkStatus();
        std::string& bytes = pending[m.offset];
        bytes.resize(n);
        return stream.Read(m.offset, n, bytes.data());
      });
  if (s.ok()) s = grouper.Finish();
  if (!s.ok()) return s;
  index.set_skipped(index.skipped() + grouper.skipped());
  return index;
}

// Whether a kept index fits `shard` (this daemon wrote it: a check, not
// a trust boundary): every member inside the shard.
bool Fits(const kept::ShardIndex& index, const Shard& shard) {
  auto inside = [&](uint64_t offset, uint64_t size) {
    return offset <= shard.size && size <= shard.size - offset;
  };
  for (const kept::ShardIndex::Sample& s : index.samples()) {
    if (!inside(s.image_offset(), s.image_size()) || s.label() < 0 ||
        (s.has_mask() && !inside(s.mask_offset(), s.mask_size()))) {
      return false;
    }
  }
  return true;
}

// One opening's indexing of every shard, several at once, each shard's
// samples handed to the assembly as it is done. Owns copies of all it
// uses: a streamed opening runs on after OpenS3Shards returned.
class ShardOpening {
 public:
  ShardOpening(const S3Url& url, std::string pattern, const ObjectStoreAccess& access,
               S3Client* client, const ScanLimits& limits, const KeptListing& keep,
               const ReadAhead& ahead, std::vector<Shard> shards,
               std::shared_ptr<S3ShardMembers> source, std::shared_ptr<DatasetGrowth> growth,
               FirstBlock first)
      : url_(url),
        pattern_(std::move(pattern)),
        access_(access),
        client_(client),
        limits_(limits),
        keep_(keep),
        ahead_(ahead),
        shards_(std::move(shards)),
        source_(std::move(source)),
        growth_(std::move(growth)),
        start_(absl::Now()),
        own_(start_),
        progress_(limits.progress != nullptr ? *limits.progress : own_),
        ix_{url_, access_, client_, limits_, ahead_, &progress_},
        assembly_(shards_.size(),
                  [in = absl::StrCat("s3://", url.bucket, "/"), this](uint32_t k, uint64_t offset,
                                                                       uint64_t size) {
                    return ShardMemberName(absl::StrCat(in, shards_[k].key, "#"), offset, size);
                  },
                  limits_, growth_.get()),
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
    return CacheKey({"s3-shard-index/1", access_.endpoint.ToString(), url_.bucket, s.key, s.etag,
                     s.size,
                     access_.credentials != nullptr ? access_.credentials->access_key_id : ""});
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
      keep_.values->Get(KeptKey(shard), [&](absl::string_view value) {
        // Charged before it is parsed: a parsed index takes about as much.
        charged = ix_.Charge(value.size());
        taken = charged.ok() && value.size() <= INT_MAX &&
                index.ParseFromArray(value.data(), static_cast<int>(value.size())) &&
                Fits(index, shard);
      });
      if (!charged.ok()) return charged;
      if (taken) {
        const uint64_t n = index.samples_size();
        if (ix_.members.fetch_add(n) + n > limits_.max_files) {
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
  S3Client* const client_;
  const ScanLimits limits_;
  const KeptListing keep_;
  const ReadAhead ahead_;
  const std::vector<Shard> shards_;
  const std::shared_ptr<S3ShardMembers> source_;
  // Held while it writes; the dataset's handle cancels it (CancelOnDrop).
  const std::shared_ptr<DatasetGrowth> growth_;
  const absl::Time start_;
  OpeningProgress own_;          // Counted where the caller sees it, else here
  OpeningProgress& progress_;    // (for the log alone).
  Indexing ix_;
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

bool IsShardKey(const std::string& key) { return absl::EndsWithIgnoreCase(key, ".tar"); }

absl::StatusOr<Dataset> OpenS3Shards(const S3Url& url, const ShardNames& named,
                                     const ObjectStoreAccess& access, S3Client* client,
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
          first.read = client->Get(access.endpoint, S3Url{url.bucket, first.key}, 0,
                                   kBlockBytes, "", access.credentials, &first.block,
                                   &first.seen, access.owner, [&] {
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
      keep, ahead, *listed, source, growth, std::move(first));
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
  ds.files_per_sample = opening->assembly().masks() ? 2 : 1;
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
