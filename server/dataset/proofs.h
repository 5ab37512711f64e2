// What a session's caller has proved by its own opens: for each file it
// opened through its confinement, the identity that open saw (device,
// inode, size, mtime, ctime), kept for a bounded time so that a file
// proven once is served from the caches without being opened again on
// every epoch. A source holds one table per dataset, and a dataset is
// one session's: a new session proves every file again.
//
// A proof older than `lifetime` is gone, so a revocation (a chmod, a group
// taken away, a file replaced) bites on the next read of that file after
// at most `lifetime`; a zero lifetime keeps nothing (every read opens).
// Paths are keyed by two unrelated 64-bit hashes: up to 128 bytes per file,
// charged to the caller's RAM for lists, a chunk at a time; once that is
// refused, files not yet proven are no longer kept (each of their reads
// opens them, as with a zero lifetime). A collision could only hand one of
// the caller's proven files' identity to another path of the same
// dataset, whose bytes the caller may read.
//
// Thread-safe: every reader thread asks it.
#ifndef STOKER_SERVER_DATASET_PROOFS_H_
#define STOKER_SERVER_DATASET_PROOFS_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/access/file_system.h"
#include "server/dataset/dataset.h"

namespace stoker {

// How long proofs last, and whom their RAM is charged to.
struct ProofLimits {
  absl::Duration lifetime = absl::ZeroDuration();
  ChargeRam charge;  // Null: not charged.
  std::function<int64_t()> now_ns;  // Null: the monotonic clock (tests pass their own).
};

class Proofs {
 public:
  // A proof's RAM as charged: its slot in the hash map (64 bytes), and the
  // map's control bytes and free slots as it grows.
  static constexpr uint64_t kBytesEach = 128;
  static constexpr uint64_t kChunk = 4096;  // Proofs charged at a time.
  explicit Proofs(ProofLimits limits);
  Proofs(const Proofs&) = delete;
  Proofs& operator=(const Proofs&) = delete;

  // The identity proven for `path` less than the lifetime ago.
  std::optional<FileVersion> Find(absl::string_view path) const;
  // `path` was just opened by the caller and found to be `version`.
  void Add(absl::string_view path, const FileVersion& version);
  // Proofs held, expired ones not yet replaced included.
  size_t size() const;
  // The caller's RAM refused room for more.
  bool full() const;

 private:
  struct Proof {
    FileVersion version;
    int64_t at_ns = 0;
  };
  using Key = std::pair<uint64_t, uint64_t>;
  static constexpr int kShards = 16;
  struct Shard {
    mutable absl::Mutex mu;
    absl::flat_hash_map<Key, Proof> proofs ABSL_GUARDED_BY(mu);
  };
  static Key KeyOf(absl::string_view path);
  // Room for one more file's proof (charged a chunk at a time).
  bool Room();

  const int64_t lifetime_ns_;
  const std::function<int64_t()> now_ns_;
  const ChargeRam charge_;
  std::array<Shard, kShards> shards_;
  mutable absl::Mutex charge_mu_;
  uint64_t kept_ ABSL_GUARDED_BY(charge_mu_) = 0;
  uint64_t room_ ABSL_GUARDED_BY(charge_mu_) = 0;
  bool refused_ ABSL_GUARDED_BY(charge_mu_) = false;
  std::vector<std::shared_ptr<void>> tokens_ ABSL_GUARDED_BY(charge_mu_);
};

}  // namespace stoker

#endif  // STOKER_SERVER_DATASET_PROOFS_H_
