#include "server/cache/l2_cache.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/checksum.h"
#include "util/log.h"
#include "util/status_macros.h"

namespace stoker {
namespace {

constexpr uint32_t kValueMagic = 0x344c4b53;    // "SKL4"
constexpr uint32_t kValueMagicV3 = 0x334c4b53;  // "SKL3": no owner.
constexpr size_t kBatchOps = 256;
// Live pages past this share of the map start an eviction down to kEvictTo.
constexpr double kEvictAt = 0.85, kEvictTo = 0.70;
// Hit keys remembered for the sweep at most; past it the set starts anew.
constexpr size_t kMostRecent = 1 << 20;

uint64_t KeyHash(absl::string_view db_key) {
  Checksum c;
  c.Update(db_key.data(), db_key.size());
  return c.value();
}

// Value layout: ValueHeader, then the full key, then the payload.
struct ValueHeader {
  uint32_t magic;
  uint32_t key_len;
  uint64_t source_size;
  int64_t source_mtime_ns;
  int64_t source_ctime_ns;
  uint64_t payload_len;
  int64_t owner;      // A uid, or L2Cache::kNobody.
  uint64_t checksum;  // Over the header's bytes before it, key and payload.
};
static_assert(sizeof(ValueHeader) == 56);
// An SKL3 value's header: the same fields without `owner`.
constexpr size_t kV3HeaderBytes = offsetof(ValueHeader, owner) + sizeof(uint64_t);

// The header's bytes its checksum covers.
absl::string_view Head(const ValueHeader& h) {
  return absl::string_view(reinterpret_cast<const char*>(&h), offsetof(ValueHeader, checksum));
}

uint64_t ValueChecksum(absl::string_view head, absl::string_view key,
                       absl::string_view payload) {
  Checksum c;
  c.Update(head.data(), head.size());
  c.Update(key.data(), key.size());
  c.Update(payload.data(), payload.size());
  return c.value();
}

// A stored value's parts, of either format (an SKL3 value's owner is
// kNobody), still pointing into the value.
struct StoredValue {
  ValueHeader header;
  absl::string_view head;  // The header's bytes its checksum covers, as stored.
  absl::string_view key, payload;
};

// False when `value` is of neither format or its lengths disagree; the
// checksum is left to the caller.
bool Split(absl::string_view value, StoredValue* out) {
  uint32_t magic = 0;
  if (value.size() < sizeof(magic)) return false;
  std::memcpy(&magic, value.data(), sizeof(magic));
  const size_t header_bytes = magic == kValueMagic     ? sizeof(ValueHeader)
                              : magic == kValueMagicV3 ? kV3HeaderBytes
                                                       : 0;
  if (header_bytes == 0 || value.size() < header_bytes) return false;
  ValueHeader& h = out->header;
  h.owner = L2Cache::kNobody;
  // Both formats lie as ValueHeader does up to their last field, the checksum.
  const size_t head_bytes = header_bytes - sizeof(h.checksum);
  std::memcpy(&h, value.data(), head_bytes);
  std::memcpy(&h.checksum, value.data() + head_bytes, sizeof(h.checksum));
  const uint64_t rest = value.size() - header_bytes;
  if (h.key_len > rest || h.payload_len != rest - h.key_len) return false;
  out->head = value.substr(0, head_bytes);
  out->key = value.substr(header_bytes, h.key_len);
  out->payload = value.substr(header_bytes + h.key_len);
  return true;
}

// Whom a stored value is charged to: its header's owner; kNobody for an
// SKL3 value, or one that is neither format.
int64_t OwnerOf(absl::string_view value) {
  StoredValue v;
  return Split(value, &v) && v.header.owner >= 0 ? v.header.owner : L2Cache::kNobody;
}

absl::string_view ViewOf(const MDB_val& v) {
  return absl::string_view(static_cast<const char*>(v.mv_data), v.mv_size);
}

using ByOwner = absl::flat_hash_map<int64_t, uint64_t>;

uint64_t HeldBy(const ByOwner& owned, int64_t owner) {
  auto it = owned.find(owner);
  return it == owned.end() ? 0 : it->second;
}

// Takes `bytes` off what `owner` holds (an owner left with none is
// removed).
void Release(ByOwner& owned, int64_t owner, uint64_t bytes) {
  auto it = owned.find(owner);
  if (it == owned.end()) return;
  it->second -= std::min(it->second, bytes);
  if (it->second == 0) owned.erase(it);
}

// Each owner's share of `kept` bytes held by `owners` owners: an equal part.
uint64_t Share(uint64_t kept, size_t owners) { return owners == 0 ? kept : kept / owners; }

uint64_t QueueMax(uint64_t configured) {
  if (configured > 0) return configured;
  uint64_t env = 0;
  const char* s = std::getenv("L2_WRITER_QUEUE_MAX");
  if (s != nullptr && absl::SimpleAtoi(s, &env) && env > 0) return env;
  return 4096;
}

}  // namespace

absl::StatusOr<std::unique_ptr<L2Cache>> L2Cache::Open(const L2Options& options) {
  LmdbEnv::Options o;
  o.read_only = false;
  // The budget is of live pages (eviction keeps them under it); the map
  // has slack beyond it for the pages LMDB cannot reuse while a reader is
  // still in an older snapshot, and for an eviction's own copied pages: a
  // map filled to its last page cannot even delete. Without it, a busy
  // reader could let the map fill while the live pages stayed under the
  // eviction threshold.
  o.map_bytes = options.max_bytes + std::max<uint64_t>(options.max_bytes / 4, 1 << 20);
  o.max_readers = options.max_readers;
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<LmdbEnv> env,
                          LmdbEnv::Open(options.path, o));
  const int dead = env->ReaderCheck();
  if (dead > 0) {
    LogInfo(absl::StrCat("L2 ", options.path, ": cleared ", dead,
                         " reader slot(s) of dead processes"));
  }
  // Each value's header is read where it lies; no value is copied.
  Owned owned;
  STOKER_RETURN_IF_ERROR(env->ForEach([&](absl::string_view, absl::string_view value) {
    owned[OwnerOf(value)] += value.size();
    return true;
  }));
  return std::unique_ptr<L2Cache>(new L2Cache(std::move(env), options,
                                              QueueMax(options.writer_queue), std::move(owned)));
}

L2Cache::L2Cache(std::unique_ptr<LmdbEnv> env, const L2Options& options,
                 uint64_t queue_max, Owned owned)
    : env_(std::move(env)), options_(options), queue_max_(queue_max), owned_(std::move(owned)) {
  writer_ = std::thread([this] {
    while (!RunLoggingExceptions("the L2 writer", [&] { WriterLoop(); })) {
    }
  });
}

L2Cache::~L2Cache() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    paused_ = false;
  }
  writer_.join();
}

std::string L2Cache::DbKey(const std::string& key) const {
  if (key.size() <= env_->max_key_size()) return key;
  Checksum c;  // The full key is in the value and compared on lookup.
  c.Update(key.data(), key.size());
  return absl::StrFormat("#%016x", c.value());
}

namespace {

// Checks a stored value against the key and the source version; on a hit
// hands take() the payload (where it lies in the map).
L2Cache::Result Classify(absl::string_view value, const std::string& key,
                         const FileVersion& version,
                         const std::function<void(absl::string_view)>& take) {
  StoredValue v;
  if (!Split(value, &v) || ValueChecksum(v.head, v.key, v.payload) != v.header.checksum) {
    return L2Cache::Result::kCorrupt;
  }
  if (v.key != key) return L2Cache::Result::kMiss;  // Hashed-key collision.
  const ValueHeader& h = v.header;
  if (h.source_size != version.size || h.source_mtime_ns != version.mtime_ns ||
      h.source_ctime_ns != version.ctime_ns) {
    return L2Cache::Result::kStale;
  }
  take(v.payload);
  return L2Cache::Result::kHit;
}

}  // namespace

L2Cache::Result L2Cache::Lookup(const std::string& key,
                                const FileVersion& version, std::string* out) {
  return Lookup(key, version, [out](absl::string_view payload) {
    out->assign(payload.data(), payload.size());
  });
}

Buffer L2Cache::PendingWrite(const std::string& key, const FileVersion& version) const {
  if (pending_count_.load(std::memory_order_acquire) == 0) return nullptr;
  absl::ReaderMutexLock lock(&mu_);
  auto it = pending_.find(key);
  return it != pending_.end() && it->second.version == version ? it->second.payload : nullptr;
}

L2Cache::Result L2Cache::Lookup(const std::string& key, const FileVersion& version,
                                const std::function<void(absl::string_view payload)>& take) {
  Result r = Result::kMiss;
  const std::string db_key = DbKey(key);
  if (Buffer queued = PendingWrite(key, version)) {
    take(absl::string_view(queued->data(), queued->size()));
    r = Result::kHit;
  } else {
    env_->View(db_key, [&](absl::string_view value) {
      r = Classify(value, key, version, take);
    }).IgnoreError();  // Absent (or unreadable): a miss.
  }
  switch (r) {
    case Result::kHit: {
      hits_.fetch_add(1, std::memory_order_relaxed);
      absl::MutexLock lock(&recent_mu_);
      if (recent_.size() >= kMostRecent) recent_.clear();
      recent_.insert(KeyHash(db_key));
      break;
    }
    case Result::kMiss:
      misses_.fetch_add(1, std::memory_order_relaxed);
      break;
    case Result::kStale:
      stale_.fetch_add(1, std::memory_order_relaxed);
      break;
    case Result::kCorrupt: {
      corrupt_.fetch_add(1, std::memory_order_relaxed);
      LogWarning(absl::StrCat("L2 cache decode failed for ", key,
                              ": entry deleted, reading the source"));
      absl::MutexLock lock(&mu_);
      pending_.erase(key);
      pending_count_.store(pending_.size(), std::memory_order_release);
      queue_.push_back(Op{true, key, {}, nullptr, kNobody});  // Deletes are never dropped.
      break;
    }
  }
  return r;
}

uint64_t L2Cache::ValueBytes(uint64_t key_bytes, uint64_t payload_bytes) {
  return sizeof(ValueHeader) + key_bytes + payload_bytes;
}

uint64_t L2Cache::OwnedBytes(int64_t owner) const {
  absl::MutexLock lock(&owned_mu_);
  return HeldBy(owned_, owner);
}

L2Cache::Owned L2Cache::OwnedNow() const {
  absl::MutexLock lock(&owned_mu_);
  return owned_;
}

void L2Cache::SetOwned(Owned owned) {
  absl::MutexLock lock(&owned_mu_);
  owned_ = std::move(owned);
}

bool L2Cache::Put(const std::string& key, const FileVersion& version,
                  Buffer payload, int64_t owner) {
  // One value may not evict most of everyone's entries to fit.
  if (payload != nullptr && payload->size() > options_.max_bytes / 8) {
    drops_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  std::string warning;  // Logged once the lock is released.
  {
    absl::MutexLock lock(&mu_);
    const uint64_t bytes = payload != nullptr ? payload->size() : 0;
    if (queue_.size() < queue_max_ &&
        (queued_bytes_ == 0 || queued_bytes_ + bytes <= options_.writer_queue_bytes)) {
      queued_bytes_ += bytes;
      const uint64_t serial = ++serial_;
      pending_[key] = Pending{version, payload, serial};
      pending_count_.store(pending_.size(), std::memory_order_release);
      queue_.push_back(
          Op{false, key, version, std::move(payload), owner >= 0 ? owner : kNobody, serial});
      return true;
    }
    const uint64_t dropped = drops_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (absl::Now() - last_drop_log_ > absl::Seconds(10)) {
      last_drop_log_ = absl::Now();
      warning = absl::StrCat("L2 writer queue full (", queue_.size(), " of ", queue_max_,
                             " writes, ", queued_bytes_ >> 20, " of ",
                             options_.writer_queue_bytes >> 20, " MiB): dropping writes, ",
                             dropped, " dropped so far");
    }
  }
  if (!warning.empty()) LogWarning(warning);
  return false;
}

void L2Cache::Flush() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](L2Cache* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
        return c->queue_.empty() && !c->writing_;
      },
      this));
}

void L2Cache::PauseWriter(bool paused) {
  absl::MutexLock lock(&mu_);
  paused_ = paused;
}

void L2Cache::WriterLoop() {
  absl::Time last_check = absl::Now();
  while (true) {
    std::deque<Op> batch;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || (!paused_ && !queue_.empty());
      };
      mu_.AwaitWithTimeout(absl::Condition(&ready), options_.reader_check_interval);
      if (queue_.empty() && stopping_) return;
      // A batch of at most an eighth of the budget (and one value): the
      // eviction before each keeps the map near its budget, where one large
      // batch into an empty map would pass it with nothing yet to evict.
      uint64_t bytes = 0;
      while (!paused_ && !queue_.empty() && batch.size() < kBatchOps &&
             bytes < options_.max_bytes / 8) {
        const Op& op = queue_.front();
        if (!op.erase) bytes += ValueBytes(op.key.size(), op.payload->size());
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      writing_ = !batch.empty();
    }
    uint64_t held = 0;  // What the batch's values count in queued_bytes_.
    for (const Op& op : batch) held += op.payload != nullptr ? op.payload->size() : 0;
    // Every write queued before this batch's last is now in it or done:
    // once it is committed (or dropped, or the writer fails), they are
    // read from the map, unless a later write of their key is queued.
    uint64_t last = 0;
    for (const Op& op : batch) last = std::max(last, op.serial);
    auto settle = absl::MakeCleanup([this, last, held] {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      queued_bytes_ -= held;
      for (auto it = pending_.begin(); it != pending_.end();) {
        if (it->second.serial <= last) {
          pending_.erase(it++);
        } else {
          ++it;
        }
      }
      pending_count_.store(pending_.size(), std::memory_order_release);
    });
    if (!batch.empty()) WriteBatch(batch);
    if (absl::Now() - last_check > options_.reader_check_interval) {
      env_->ReaderCheck();
      last_check = absl::Now();
    }
  }
}

uint64_t L2Cache::LiveBytes() const {
  uint64_t entries = 0, bytes = 0;
  env_->LiveUsage(&entries, &bytes);
  return bytes;
}

uint64_t L2Cache::Evict(uint64_t bytes, const Owned& incoming) {
  Owned owned = OwnedNow();
  // What each owner holds once the batch is written; the shares are of
  // what this eviction keeps.
  Owned projected = owned;
  for (const auto& [owner, n] : incoming) projected[owner] += n;
  uint64_t total = 0;
  for (const auto& [owner, n] : projected) total += n;
  const uint64_t share = Share(total - std::min(total, bytes), projected.size());
  uint64_t freed = 0, evicted = 0;
  absl::flat_hash_set<uint64_t> recent;
  {
    absl::MutexLock lock(&recent_mu_);
    recent.swap(recent_);
  }
  absl::Status s = env_->WriteTxn([&](MDB_txn* txn, MDB_dbi dbi) -> absl::Status {
    MDB_cursor* cur = nullptr;
    STOKER_RETURN_IF_ERROR(LmdbStatus(mdb_cursor_open(txn, dbi, &cur), "L2 eviction"));
    MDB_val k{sweep_from_.size(), sweep_from_.data()}, v;
    int rc = sweep_from_.empty() ? mdb_cursor_get(cur, &k, &v, MDB_FIRST)
                                 : mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    uint64_t entries = 0, live = 0;
    env_->LiveUsage(&entries, &live);
    // Goes on from the cursor, wrapping at the end, for `laps` times the
    // entries at most, deleting entries not hit since the last pass (those
    // are spared once) of the owners in `only` (null: anyone's); an owner
    // leaves `only` once down to its share, and the sweep ends when none is
    // left.
    auto sweep = [&](uint64_t laps, absl::flat_hash_set<int64_t>* only) {
      for (uint64_t seen = 0; freed < bytes && seen < laps * entries; ++seen) {
        if (only != nullptr && only->empty()) return;
        if (rc == MDB_NOTFOUND) rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
        if (rc != 0) return;  // Empty, or an error.
        const int64_t owner = OwnerOf(ViewOf(v));
        if ((only != nullptr && !only->contains(owner)) || recent.erase(KeyHash(ViewOf(k))) > 0) {
          rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
          continue;
        }
        const uint64_t size = v.mv_size;
        rc = mdb_cursor_del(cur, 0);
        if (rc != 0) return;
        freed += size;
        ++evicted;
        Release(owned, owner, size);
        Release(projected, owner, size);
        if (only != nullptr && (HeldBy(projected, owner) <= share || HeldBy(owned, owner) == 0)) {
          only->erase(owner);
        }
        rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);  // After a delete: the entry after it.
      }
    };
    // Owners over their share first (two laps: past the entries spared
    // once), then, only when that was not enough, everyone.
    absl::flat_hash_set<int64_t> over;
    for (const auto& [owner, n] : owned) {
      if (HeldBy(projected, owner) > share) over.insert(owner);
    }
    sweep(2, &over);
    if (rc == 0 || rc == MDB_NOTFOUND) sweep(1, nullptr);
    sweep_from_ = rc == 0 ? std::string(ViewOf(k)) : "";
    mdb_cursor_close(cur);
    // A failed delete leaves the transaction unusable: abort it all.
    return rc == 0 || rc == MDB_NOTFOUND ? absl::OkStatus() : LmdbStatus(rc, "L2 eviction");
  });
  if (!s.ok()) {
    if (write_errors_.fetch_add(1, std::memory_order_relaxed) < 10) {
      LogWarning(absl::StrCat("L2 eviction failed: ", s.message()));
    }
    sweep_from_.clear();
    return 0;
  }
  SetOwned(std::move(owned));
  {
    // Marks the sweep did not reach wait for it.
    absl::MutexLock lock(&recent_mu_);
    if (recent_.size() + recent.size() <= kMostRecent) recent_.insert(recent.begin(), recent.end());
  }
  evictions_.fetch_add(evicted, std::memory_order_relaxed);
  if (freed > 0) map_full_.store(false, std::memory_order_relaxed);
  return freed;
}

void L2Cache::WriteBatch(std::deque<Op>& batch, bool retried) {
  // Room first: a map filled to its last page cannot even delete (LMDB
  // copies pages to change them), so eviction runs before a write would
  // pass kEvictAt, not after the map is full.
  uint64_t incoming = 0;
  Owned incoming_by;  // Each owner's part of it.
  for (const Op& op : batch) {
    if (op.erase) continue;
    const uint64_t bytes = ValueBytes(op.key.size(), op.payload->size());
    incoming += bytes;
    incoming_by[op.owner] += bytes;
  }
  const uint64_t live = LiveBytes();
  if (incoming > 0 && live + incoming > options_.max_bytes * kEvictAt) {
    const uint64_t keep = static_cast<uint64_t>(options_.max_bytes * kEvictTo);
    Evict(live + incoming > keep ? live + incoming - keep : 0, incoming_by);
  }
  Owned owned = OwnedNow();  // After the eviction's.
  uint64_t puts = 0;
  absl::Status s = env_->WriteTxn([&](MDB_txn* txn, MDB_dbi dbi) -> absl::Status {
    for (const Op& op : batch) {
      std::string db_key = DbKey(op.key);
      MDB_val k{db_key.size(), db_key.data()};
      // What the key held is its owner's no more (overwritten or deleted).
      MDB_val old;
      int rc = mdb_get(txn, dbi, &k, &old);
      if (rc != 0 && rc != MDB_NOTFOUND) return LmdbStatus(rc, "L2 get");
      const bool held = rc == 0;
      if (held) Release(owned, OwnerOf(ViewOf(old)), old.mv_size);
      if (op.erase) {
        rc = held ? mdb_del(txn, dbi, &k, nullptr) : 0;
        if (rc != 0) return LmdbStatus(rc, "L2 delete");
        continue;
      }
      ValueHeader h{kValueMagic, static_cast<uint32_t>(op.key.size()),
                    op.version.size, op.version.mtime_ns, op.version.ctime_ns,
                    op.payload->size(), op.owner, 0};
      h.checksum = ValueChecksum(
          Head(h), op.key, absl::string_view(op.payload->data(), op.payload->size()));
      // Reserved in the map and written there: no copy of the value first.
      MDB_val v{ValueBytes(op.key.size(), op.payload->size()), nullptr};
      rc = mdb_put(txn, dbi, &k, &v, MDB_RESERVE);
      if (rc != 0) return LmdbStatus(rc, "L2 put");
      char* at = static_cast<char*>(v.mv_data);
      std::memcpy(at, &h, sizeof(h));
      std::memcpy(at + sizeof(h), op.key.data(), op.key.size());
      std::memcpy(at + sizeof(h) + op.key.size(), op.payload->data(), op.payload->size());
      owned[op.owner] += v.mv_size;
      ++puts;
    }
    return absl::OkStatus();
  });
  if (s.ok()) {
    SetOwned(std::move(owned));
    inserts_.fetch_add(puts, std::memory_order_relaxed);
    if (puts > 0) map_full_.store(false, std::memory_order_relaxed);
    return;
  }
  if (s.code() == absl::StatusCode::kResourceExhausted && batch.size() > 1) {
    // Full before the proactive eviction caught up: in halves, each making
    // its own room, so what fits is written.
    std::deque<Op> second(std::make_move_iterator(batch.begin() + batch.size() / 2),
                          std::make_move_iterator(batch.end()));
    batch.resize(batch.size() / 2);
    WriteBatch(batch);
    WriteBatch(second);
    return;
  }
  if (s.code() == absl::StatusCode::kResourceExhausted && !retried) {
    // One write: make room for it and try once more.
    const uint64_t bytes = batch[0].payload != nullptr ? batch[0].payload->size() : 0;
    if (Evict(std::max<uint64_t>(bytes * 2, options_.max_bytes / 4), incoming_by) > 0) {
      WriteBatch(batch, /*retried=*/true);
      return;
    }
  }
  drops_.fetch_add(batch.size(), std::memory_order_relaxed);
  if (s.code() == absl::StatusCode::kResourceExhausted) {
    if (!map_full_.exchange(true)) {
      LogWarning(absl::StrCat("L2 ", options_.path, " is full (",
                              options_.max_bytes,
                              " byte map) and eviction freed too little: writes this large "
                              "are dropped; serving goes on"));
    }
    return;
  }
  if (write_errors_.fetch_add(1, std::memory_order_relaxed) < 10) {
    LogWarning(absl::StrCat("L2 write failed: ", s.message()));
  }
}

v1::TierStats L2Cache::Stats() const {
  v1::TierStats t;
  t.set_tier("l2");
  t.set_enabled(true);
  t.set_hits(hits_.load(std::memory_order_relaxed));
  t.set_misses(misses_.load(std::memory_order_relaxed));
  t.set_stale(stale_.load(std::memory_order_relaxed));
  t.set_corrupt(corrupt_.load(std::memory_order_relaxed));
  t.set_inserts(inserts_.load(std::memory_order_relaxed));
  t.set_writer_drops(drops_.load(std::memory_order_relaxed));
  t.set_write_errors(write_errors_.load(std::memory_order_relaxed));
  t.set_map_full(map_full_.load(std::memory_order_relaxed) ? 1 : 0);
  t.set_evictions(evictions_.load(std::memory_order_relaxed));
  t.set_capacity_bytes(options_.max_bytes);
  t.set_writer_queue_max(queue_max_);
  uint64_t entries = 0, bytes = 0;
  env_->Usage(&entries, &bytes);
  t.set_entries(entries);
  t.set_bytes(bytes);
  absl::MutexLock lock(&mu_);
  t.set_writer_queue_depth(queue_.size());
  return t;
}

}  // namespace stoker
