#include "server/dataset/proofs.h"

#include <chrono>
#include <functional>
#include <string_view>
#include <utility>

#include "absl/hash/hash.h"

namespace stoker {

Proofs::Proofs(ProofLimits limits)
    : lifetime_ns_(limits.lifetime <= absl::ZeroDuration()
                       ? 0
                       : absl::ToInt64Nanoseconds(limits.lifetime)),
      now_ns_(limits.now_ns != nullptr ? std::move(limits.now_ns)
                                : [] {
                                  return static_cast<int64_t>(
                                      std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
                                }),
      charge_(std::move(limits.charge)) {}

Proofs::Key Proofs::KeyOf(absl::string_view path) {
  return {std::hash<std::string_view>{}(std::string_view(path.data(), path.size())),
          absl::Hash<absl::string_view>{}(path)};
}

std::optional<FileVersion> Proofs::Find(absl::string_view path) const {
  if (lifetime_ns_ == 0) return std::nullopt;
  const Key key = KeyOf(path);
  const Shard& shard = shards_[key.first % kShards];
  Proof proof;
  {
    absl::ReaderMutexLock lock(&shard.mu);
    auto it = shard.proofs.find(key);
    if (it == shard.proofs.end()) return std::nullopt;
    proof = it->second;
  }
  if (now_ns_() - proof.at_ns >= lifetime_ns_) return std::nullopt;
  return proof.version;
}

void Proofs::Add(absl::string_view path, const FileVersion& version) {
  if (lifetime_ns_ == 0) return;
  const Key key = KeyOf(path);
  Shard& shard = shards_[key.first % kShards];
  const Proof proof{version, now_ns_()};
  absl::MutexLock lock(&shard.mu);
  auto it = shard.proofs.find(key);
  if (it != shard.proofs.end()) {
    it->second = proof;
  } else if (Room()) {  // Under the shard's lock: the charge's is taken after it.
    shard.proofs.emplace(key, proof);
  }
}

bool Proofs::Room() {
  if (charge_ == nullptr) return true;
  absl::MutexLock lock(&charge_mu_);
  if (kept_ == room_) {
    if (refused_) return false;
    std::shared_ptr<void> token = charge_(kChunk * kBytesEach);
    if (token == nullptr) {
      refused_ = true;
      return false;
    }
    tokens_.push_back(std::move(token));
    room_ += kChunk;
  }
  ++kept_;
  return true;
}

bool Proofs::full() const {
  absl::MutexLock lock(&charge_mu_);
  return refused_;
}

size_t Proofs::size() const {
  size_t n = 0;
  for (const Shard& shard : shards_) {
    absl::ReaderMutexLock lock(&shard.mu);
    n += shard.proofs.size();
  }
  return n;
}

}  // namespace stoker
