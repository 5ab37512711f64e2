#include "server/cache/fetcher.h"

#include "absl/strings/str_cat.h"
#include "shm/futex.h"
#include "util/status_macros.h"

namespace stoker {

SampleFetcher::SampleFetcher(ShardedLruCache* l1, L2Cache* l2, int reader_threads,
                             MemoryBudget* in_flight, uint64_t max_file_bytes)
    : l1_(l1),
      l2_(l2),
      reader_threads_(reader_threads),
      in_flight_(in_flight),
      max_file_bytes_(max_file_bytes) {}

absl::StatusOr<Bytes> SampleFetcher::Fetch(const Dataset& ds,
                                           const std::string& path, int64_t owner,
                                           bool* from_source,
                                           const SourceKey* known, bool charged) {
  if (from_source != nullptr) *from_source = false;
  if (ds.source == nullptr) {
    return absl::InternalError(absl::StrCat(ds.description, " has no file source"));
  }
  SourceKey identified;
  if (known == nullptr) {
    STOKER_ASSIGN_OR_RETURN(identified, Identify(ds, path));
    known = &identified;
  }
  const std::string key = known->key();
  if (!known->proven) {
    // Not yet the caller's to be served from a cache: its own read first
    // (which proves it), kept for the next callers as any read is. A read
    // of the same source in flight is its own too (the proof is the
    // source's: one per session), so it joins that one.
    return Shared(absl::StrCat(key, std::string(1, '\0'),
                               reinterpret_cast<uintptr_t>(ds.source.get())),
                  false, path, from_source,
                  [&](bool* read_source) -> absl::StatusOr<Bytes> {
                    // This session's read of it that ended since `known`
                    // was identified (an epoch's last reads overlap the
                    // next one's first) proved it and kept its bytes.
                    absl::StatusOr<SourceKey> now = ds.source->Identify(path);
                    if (now.ok() && now->proven && now->key() == key) {
                      if (Bytes hit = l1_->Lookup(key)) return hit;
                      return Load(ds, path, *now, owner, read_source, charged);
                    }
                    return ReadAndKeep(ds, path, *known, owner, read_source, charged);
                  });
  }
  return Shared(key, true, path, from_source, [&](bool* read_source) {
    return Load(ds, path, *known, owner, read_source, charged);
  });
}

absl::Status SampleFetcher::Warm(const Dataset& ds, const std::string& path, int64_t owner,
                                 bool* from_source) {
  if (from_source != nullptr) *from_source = false;
  STOKER_ASSIGN_OR_RETURN(SourceKey id, Identify(ds, path));
  if (id.proven && l1_->Lookup(id.key()) != nullptr) return absl::OkStatus();  // Warm.
  absl::StatusOr<std::shared_ptr<void>> room = Charge(ds, owner, {id}, path);
  if (!room.ok()) {
    read_errors_.fetch_add(1, std::memory_order_relaxed);
    return room.status();
  }
  return Fetch(ds, path, owner, from_source, &id, /*charged=*/true).status();
}

absl::StatusOr<Bytes> SampleFetcher::Shared(
    const std::string& flight_key, bool cached, const std::string& path, bool* from_source,
    const std::function<absl::StatusOr<Bytes>(bool* read_source)>& read, bool rejoin) {
  std::shared_ptr<Inflight> flight;
  bool leader = false;
  {
    // L1 is consulted under mu_: a leader inserts into L1 before it leaves
    // the in-flight table, so a fetch either finds the value or joins the
    // read, never starts a second one.
    absl::MutexLock lock(&mu_);
    if (cached) {
      if (Bytes hit = l1_->Lookup(flight_key)) return hit;
    }
    auto [it, inserted] = inflight_.try_emplace(flight_key);
    if (inserted) it->second = std::make_shared<Inflight>();
    flight = it->second;
    leader = inserted;
  }
  if (!leader) {
    joined_.fetch_add(1, std::memory_order_relaxed);
    flight->done.WaitForNotification();
    // A leader that failed may have failed for itself, not for this
    // caller (its session closed, its user had no room, its rights or its
    // client's signature were refused, its client did not answer): this
    // one reads again, once, as itself.
    if (rejoin && !flight->result.ok()) {
      return Shared(flight_key, cached, path, from_source, read, /*rejoin=*/false);
    }
    return flight->result;
  }
  bool read_source = false;
  // Whatever happens, the joined readers are woken and the entry cleared.
  flight->result = Guarded(absl::StrCat("reading ", path), [&] { return read(&read_source); });
  if (from_source != nullptr) *from_source = read_source;
  {
    absl::MutexLock lock(&mu_);
    inflight_.erase(flight_key);
  }
  flight->done.Notify();
  return flight->result;
}

absl::StatusOr<SourceKey> SampleFetcher::Identify(const Dataset& ds,
                                                  const std::string& path) {
  if (ds.source == nullptr) {
    return absl::InternalError(absl::StrCat(ds.description, " has no file source"));
  }
  absl::StatusOr<SourceKey> id = ds.source->Identify(path);
  if (!id.ok()) {
    read_errors_.fetch_add(1, std::memory_order_relaxed);
  } else if (id->opened != nullptr) {
    stats_.fetch_add(1, std::memory_order_relaxed);  // Opened now, not proven before.
  }
  return id;
}

absl::StatusOr<Bytes> SampleFetcher::Load(const Dataset& ds,
                                          const std::string& path,
                                          const SourceKey& id, int64_t owner,
                                          bool* read_source, bool charged) {
  // Files can change between runs, so an L2 entry is checked against the
  // file's current size and mtime. Unversioned sources (LMDB) are local
  // already: no L2.
  const bool use_l2 = l2_ != nullptr && ds.source->Versioned();
  if (use_l2) {
    std::string bytes;
    if (l2_->Lookup(id.file, id.version, &bytes) == L2Cache::Result::kHit) {
      auto value = std::make_shared<const std::string>(std::move(bytes));
      l1_->Insert(id.key(), value);
      return Bytes(value);
    }
  }
  return ReadAndKeep(ds, path, id, owner, read_source, charged);
}

absl::StatusOr<Bytes> SampleFetcher::ReadAndKeep(const Dataset& ds, const std::string& path,
                                                 const SourceKey& id, int64_t owner,
                                                 bool* read_source, bool charged) {
  *read_source = true;
  FileVersion version;
  absl::StatusOr<Bytes> read = ReadSource(ds, path, id, owner, &version, charged);
  if (!read.ok()) return read.status();
  // Cached only under the identity it was read as: a file replaced between
  // the stat and the read is served, not kept.
  const bool same = !ds.source->Versioned() ||
                    version.SameFileAs(id.version);
  if (!same) return read;
  Keep(id, *read, owner, ds.source->Versioned());
  return read;
}

void SampleFetcher::Keep(const SourceKey& id, Bytes bytes, int64_t owner, bool l2) {
  l1_->Insert(id.key(), bytes);
  if (l2 && l2_ != nullptr) l2_->Put(id.file, id.version, std::move(bytes), owner);
}

absl::StatusOr<std::shared_ptr<void>> SampleFetcher::Charge(const Dataset& ds, int64_t owner,
                                                            const std::vector<SourceKey>& ids,
                                                            absl::string_view what) {
  if (in_flight_ == nullptr) return nullptr;
  uint64_t bytes = 0;
  for (const SourceKey& id : ids)
    if (id.read_size() <= max_file_bytes_) bytes += id.read_size();
  if (bytes == 0) return nullptr;
  // Several files together never ask more than the whole (each fits it).
  if (ids.size() > 1) bytes = std::min(bytes, in_flight_->total());
  return in_flight_->WaitNamed(owner, bytes, kReadRoomWait, ds.reads_cancel.get(), what,
                               "--max-read-bytes-in-flight");
}

absl::StatusOr<Bytes> SampleFetcher::ReadSource(const Dataset& ds,
                                                const std::string& path,
                                                const SourceKey& id, int64_t owner,
                                                FileVersion* version, bool charged) {
  // Charged before a byte is allocated: what reads in flight hold is
  // bounded by the budget, not by reader threads x the largest file.
  // A shard's member is charged its own bytes, not the shard's.
  std::shared_ptr<void> room;
  if (!charged) {
    absl::StatusOr<std::shared_ptr<void>> waited = Charge(ds, owner, {id}, path);
    if (!waited.ok()) {
      read_errors_.fetch_add(1, std::memory_order_relaxed);
      return waited.status();
    }
    room = std::move(*waited);
  }
  auto bytes = std::make_shared<std::string>();
  const uint64_t t0 = shm::MonotonicNanos();
  absl::Status s = ds.source->ReadIdentified(id, path, bytes.get(), version);
  const uint64_t ns = shm::MonotonicNanos() - t0;
  reads_.fetch_add(1, std::memory_order_relaxed);
  read_ns_total_.fetch_add(ns, std::memory_order_relaxed);
  uint64_t prev = read_ns_max_.load(std::memory_order_relaxed);
  while (ns > prev && !read_ns_max_.compare_exchange_weak(prev, ns)) {
  }
  if (s.ok() && bytes->empty() && !ds.source->EmptyIsData(path))
    s = absl::DataLossError("file is empty");
  if (!s.ok()) {
    read_errors_.fetch_add(1, std::memory_order_relaxed);
    return s;
  }
  read_bytes_.fetch_add(bytes->size(), std::memory_order_relaxed);
  return Bytes(std::move(bytes));
}

v1::ReaderStats SampleFetcher::Stats() const {
  v1::ReaderStats r;
  r.set_threads(reader_threads_);
  r.set_source_reads(reads_.load(std::memory_order_relaxed));
  r.set_source_bytes(read_bytes_.load(std::memory_order_relaxed));
  r.set_source_errors(read_errors_.load(std::memory_order_relaxed));
  r.set_source_stats(stats_.load(std::memory_order_relaxed));
  r.set_joined_reads(joined_.load(std::memory_order_relaxed));
  r.set_read_seconds_total(read_ns_total_.load(std::memory_order_relaxed) / 1e9);
  r.set_read_seconds_max(read_ns_max_.load(std::memory_order_relaxed) / 1e9);
  return r;
}

}  // namespace stoker
