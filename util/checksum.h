// A fast, order-sensitive 64-bit content hash for comparing delivered
// batches across runs (not cryptographic). Not thread-safe; cheap to copy.
#ifndef STOKER_UTIL_CHECKSUM_H_
#define STOKER_UTIL_CHECKSUM_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace stoker {

class Checksum {
 public:
  Checksum() = default;
  // Continues from state() of another Checksum (the C ABI keeps the state).
  explicit Checksum(uint64_t state) : h_(state) {}
  uint64_t state() const { return h_; }

  void Update(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (n >= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      Mix(w);
      p += 8;
      n -= 8;
    }
    uint64_t tail = 0;
    std::memcpy(&tail, p, n);
    Mix(tail ^ (uint64_t{n} << 56));
  }
  uint64_t value() const {
    // Final avalanche (splitmix64 finalizer).
    uint64_t z = h_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

 private:
  void Mix(uint64_t w) {
    h_ ^= w;
    h_ *= 0x100000001b3ULL;
    h_ ^= h_ >> 29;
  }
  uint64_t h_ = 0xcbf29ce484222325ULL;
};

}  // namespace stoker

#endif  // STOKER_UTIL_CHECKSUM_H_
