// Element values converted between the types of the table in shm/dtypes.h,
// the one place the daemon does so (array reads, normalized pixels, value
// ops on 16-bit float fields).
//
// By value: an integer or float into an integer type truncates toward zero
// and saturates (NaN is 0); anything into a float type is rounded to
// nearest, ties to even (float16: overflow to inf, subnormals kept). NaN
// stays a NaN: 0x7fc0 in bfloat16 and 0x7e00 with its sign in float16, the
// patterns torch makes (a run through F16C keeps a NaN's top payload bits).
// Runs take fast paths for the pairs a training job meets: the same type (a
// copy), 16-bit floats to and from float32 (F16C where the CPU has it), the
// narrow integers and float64 into float32, integers into wider integers.
// Pure functions; thread-safe.
#ifndef STOKER_SERVER_IMAGING_ELEMENTS_H_
#define STOKER_SERVER_IMAGING_ELEMENTS_H_

#include <cstddef>
#include <cstdint>

#include "shm/dtypes.h"

namespace stoker {

using shm::ElemType;

// Scalar conversions of the 16-bit float types.
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);
uint16_t FloatToBfloat16(float f);
float Bfloat16ToFloat(uint16_t b);

// `n` contiguous elements of type `from` at `src` into `dst` as type `to`.
// src and dst may not overlap (unless from == to and they are equal).
void ConvertRun(const uint8_t* src, ElemType from, uint64_t n, uint8_t* dst, ElemType to);

// `n` float32 values into `dst` as type `to` (ConvertRun from float32).
inline void StoreFloats(const float* src, uint64_t n, ElemType to, void* dst) {
  ConvertRun(reinterpret_cast<const uint8_t*>(src), ElemType::kFloat32, n,
             static_cast<uint8_t*>(dst), to);
}

}  // namespace stoker

#endif  // STOKER_SERVER_IMAGING_ELEMENTS_H_
