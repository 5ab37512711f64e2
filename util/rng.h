// Deterministic random numbers that are identical on every platform and
// library version (unlike std:: distributions): xoshiro256** seeded through
// SplitMix64. Used for epoch permutations and per-sample augmentation, so a
// session's output depends only on its spec. Not thread-safe; one per user.
#ifndef STOKER_UTIL_RNG_H_
#define STOKER_UTIL_RNG_H_

#include <cmath>
#include <cstdint>
#include <initializer_list>

namespace stoker {

inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Combines several values (seed, epoch, sample index, ...) into one seed.
inline uint64_t MixSeed(std::initializer_list<uint64_t> parts) {
  uint64_t state = 0x5354'4f4b'4552'0001ULL;
  uint64_t out = 0;
  for (uint64_t p : parts) {
    state ^= p;
    out = SplitMix64(state);
  }
  return out;
}

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& w : s_) w = SplitMix64(seed);
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double Uniform01() { return (Next() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform01(); }

  // Uniform integer in [0, n), unbiased (rejection); n > 0.
  uint64_t Below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t r;
    do {
      r = Next();
    } while (r >= limit);
    return r % n;
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace stoker

#endif  // STOKER_UTIL_RNG_H_
