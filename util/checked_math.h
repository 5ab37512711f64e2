// Overflow-checked size arithmetic: every shape x element-size product and
// every offset + length the daemon computes from input it does not control
// (an .npy or HDF5 header, a spec, a ring geometry) goes through here, so a
// crafted dimension is an error naming it instead of a 64-bit wrap and an
// out-of-bounds read or write. Header-only; no state.
#ifndef STOKER_UTIL_CHECKED_MATH_H_
#define STOKER_UTIL_CHECKED_MATH_H_

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace stoker {

// a * b and a + b, false when the result does not fit 64 bits.
inline bool CheckedMul(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}
inline bool CheckedAdd(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

// The product of `dims` and `scale` (an element size), at most `limit`.
// FAILED_PRECONDITION naming `what` when it overflows or exceeds the limit.
inline absl::StatusOr<uint64_t> CheckedProduct(const std::vector<uint64_t>& dims,
                                               uint64_t scale, uint64_t limit,
                                               absl::string_view what) {
  uint64_t n = scale;
  for (uint64_t d : dims) {
    if (d == 0) return 0;  // Whatever the others are.
  }
  for (uint64_t d : dims) {
    if (!CheckedMul(n, d, &n) || n > limit) {
      std::string shape;
      for (uint64_t e : dims) absl::StrAppend(&shape, shape.empty() ? "" : "x", e);
      return absl::FailedPreconditionError(absl::StrCat(
          what, ": shape ", shape, " of ", scale, "-byte elements exceeds ", limit,
          " bytes"));
    }
  }
  return n;
}

// Whether [offset, offset + length) lies within [0, size), without overflow.
inline bool RangeWithin(uint64_t offset, uint64_t length, uint64_t size) {
  uint64_t end;
  return CheckedAdd(offset, length, &end) && end <= size;
}

}  // namespace stoker

#endif  // STOKER_UTIL_CHECKED_MATH_H_
