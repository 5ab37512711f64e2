#include "server/ops/volume.h"

#include <algorithm>
#include <cstring>

namespace stoker {
namespace {

// Elements before dimension `from` up to `to` (exclusive), multiplied.
uint64_t Product(const std::vector<uint64_t>& shape, size_t from, size_t to) {
  uint64_t n = 1;
  for (size_t k = from; k < to; ++k) n *= shape[k];
  return n;
}

void SwapBlocks(uint8_t* a, uint8_t* b, size_t bytes) {
  if (bytes <= 8) {  // One element.
    uint8_t t[8];
    std::memcpy(t, a, bytes);
    std::memcpy(a, b, bytes);
    std::memcpy(b, t, bytes);
    return;
  }
  uint8_t buf[256];
  while (bytes > 0) {
    const size_t n = std::min(bytes, sizeof(buf));
    std::memcpy(buf, a, n);
    std::memcpy(a, b, n);
    std::memcpy(b, buf, n);
    a += n;
    b += n;
    bytes -= n;
  }
}

}  // namespace

void FlipAxis(uint8_t* data, const std::vector<uint64_t>& shape, size_t elem, size_t axis) {
  const uint64_t outer = Product(shape, 0, axis), n = shape[axis];
  const size_t block = Product(shape, axis + 1, shape.size()) * elem;
  for (uint64_t o = 0; o < outer; ++o) {
    uint8_t* base = data + o * n * block;
    for (uint64_t j = 0; j < n / 2; ++j) SwapBlocks(base + j * block, base + (n - 1 - j) * block, block);
  }
}

void SwapAxes(uint8_t* data, const std::vector<uint64_t>& shape, size_t elem, size_t a,
              size_t b) {
  if (a == b) return;
  if (a > b) std::swap(a, b);
  // [outer, n (a), mid, n (b), inner]: element (o, i, m, j) <-> (o, j, m, i).
  const uint64_t outer = Product(shape, 0, a), n = shape[a], mid = Product(shape, a + 1, b);
  const size_t inner = Product(shape, b + 1, shape.size()) * elem;
  auto at = [&](uint64_t o, uint64_t i, uint64_t m, uint64_t j) {
    return data + (((o * n + i) * mid + m) * n + j) * inner;
  };
  for (uint64_t o = 0; o < outer; ++o) {
    for (uint64_t i = 0; i < n; ++i) {
      for (uint64_t m = 0; m < mid; ++m) {
        for (uint64_t j = i + 1; j < n; ++j) SwapBlocks(at(o, i, m, j), at(o, j, m, i), inner);
      }
    }
  }
}

void Rot90(uint8_t* data, const std::vector<uint64_t>& shape, size_t elem, uint32_t k, size_t a,
           size_t b) {
  // As numpy: k = 1 flips axis b then swaps; k = 2 flips both; k = 3 swaps
  // then flips axis b.
  switch (k % 4) {
    case 1:
      FlipAxis(data, shape, elem, b);
      SwapAxes(data, shape, elem, a, b);
      break;
    case 2:
      FlipAxis(data, shape, elem, a);
      FlipAxis(data, shape, elem, b);
      break;
    case 3:
      SwapAxes(data, shape, elem, a, b);
      FlipAxis(data, shape, elem, b);
      break;
    default:
      break;
  }
}

}  // namespace stoker
