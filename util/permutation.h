// A keyed pseudo-random permutation of [0, n) evaluated one element at a
// time: At(i) costs a few hashes and no memory, so an order over 10^12
// samples is drawn lazily, position by position, never materialised. A
// balanced four-round Feistel network over the smallest even number of bits
// that holds n, walked along its cycle until it lands below n (fewer than 4
// steps on average, as the domain is under 4n). The same (n, key) gives the
// same permutation on every platform. Immutable; thread-safe.
#ifndef STOKER_UTIL_PERMUTATION_H_
#define STOKER_UTIL_PERMUTATION_H_

#include <cstdint>

#include "util/rng.h"

namespace stoker {

class IndexPermutation {
 public:
  IndexPermutation(uint64_t n, uint64_t key) : n_(n) {
    int bits = 2;
    while (bits < 64 && (uint64_t{1} << bits) < n) bits += 2;
    half_ = bits / 2;
    mask_ = (uint64_t{1} << half_) - 1;
    for (uint64_t& k : keys_) k = SplitMix64(key);
  }

  uint64_t size() const { return n_; }

  // The element at position i < size() (i itself past the end).
  uint64_t At(uint64_t i) const {
    if (n_ <= 1 || i >= n_) return i;
    do {
      i = Encrypt(i);
    } while (i >= n_);
    return i;
  }

 private:
  uint64_t Encrypt(uint64_t x) const {
    uint64_t left = x >> half_, right = x & mask_;
    for (uint64_t k : keys_) {
      uint64_t state = right ^ k;
      const uint64_t next = left ^ (SplitMix64(state) & mask_);
      left = right;
      right = next;
    }
    return (left << half_) | right;
  }

  uint64_t n_;
  int half_ = 1;
  uint64_t mask_ = 1;
  uint64_t keys_[4];
};

}  // namespace stoker

#endif  // STOKER_UTIL_PERMUTATION_H_
