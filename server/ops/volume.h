// In-place geometry of a row-major N-D array of `elem`-byte elements (an
// array field's sample as written, any dtype): what the 3-D ops
// (axis_flip, rot90) are made of. The caller checks axes against the shape.
#ifndef STOKER_SERVER_OPS_VOLUME_H_
#define STOKER_SERVER_OPS_VOLUME_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stoker {

// Reverses axis `axis` (numpy.flip(x, axis)).
void FlipAxis(uint8_t* data, const std::vector<uint64_t>& shape, size_t elem, size_t axis);

// Swaps axes a and b, of one size (numpy.swapaxes(x, a, b)).
void SwapAxes(uint8_t* data, const std::vector<uint64_t>& shape, size_t elem, size_t a,
              size_t b);

// numpy.rot90(x, k, axes=(a, b)) for axes of one size, k in 0..3.
void Rot90(uint8_t* data, const std::vector<uint64_t>& shape, size_t elem, uint32_t k, size_t a,
           size_t b);

}  // namespace stoker

#endif  // STOKER_SERVER_OPS_VOLUME_H_
