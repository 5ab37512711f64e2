#include "server/imaging/elements.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace stoker {
namespace {

template <typename T>
double Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return static_cast<double>(v);
}

double LoadAny(const uint8_t* p, ElemType t) {
  switch (t) {
    case ElemType::kBool: return *p != 0;
    case ElemType::kInt8: return Load<int8_t>(p);
    case ElemType::kUint8: return *p;
    case ElemType::kInt16: return Load<int16_t>(p);
    case ElemType::kUint16: return Load<uint16_t>(p);
    case ElemType::kInt32: return Load<int32_t>(p);
    case ElemType::kUint32: return Load<uint32_t>(p);
    case ElemType::kInt64: return Load<int64_t>(p);
    case ElemType::kUint64: return Load<uint64_t>(p);
    case ElemType::kFloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return HalfToFloat(h);
    }
    case ElemType::kBfloat16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return Bfloat16ToFloat(b);
    }
    case ElemType::kFloat32: return Load<float>(p);
    case ElemType::kFloat64: return Load<double>(p);
  }
  return 0;
}

template <typename T>
void StoreInt(double v, uint8_t* p) {
  T out;
  if (std::isnan(v)) {
    out = 0;
  } else if (v <= static_cast<double>(std::numeric_limits<T>::min())) {
    out = std::numeric_limits<T>::min();
  } else if (v >= static_cast<double>(std::numeric_limits<T>::max())) {
    out = std::numeric_limits<T>::max();
  } else {
    out = static_cast<T>(v);
  }
  std::memcpy(p, &out, sizeof(T));
}

template <typename T>
void Store(T v, uint8_t* p) {
  std::memcpy(p, &v, sizeof(T));
}

void StoreAny(double v, uint8_t* p, ElemType t) {
  switch (t) {
    case ElemType::kBool: *p = v != 0; break;
    case ElemType::kInt8: StoreInt<int8_t>(v, p); break;
    case ElemType::kUint8: StoreInt<uint8_t>(v, p); break;
    case ElemType::kInt16: StoreInt<int16_t>(v, p); break;
    case ElemType::kUint16: StoreInt<uint16_t>(v, p); break;
    case ElemType::kInt32: StoreInt<int32_t>(v, p); break;
    case ElemType::kUint32: StoreInt<uint32_t>(v, p); break;
    case ElemType::kInt64: StoreInt<int64_t>(v, p); break;
    case ElemType::kUint64: StoreInt<uint64_t>(v, p); break;
    case ElemType::kFloat16: Store(FloatToHalf(static_cast<float>(v)), p); break;
    case ElemType::kBfloat16: Store(FloatToBfloat16(static_cast<float>(v)), p); break;
    case ElemType::kFloat32: Store(static_cast<float>(v), p); break;
    case ElemType::kFloat64: Store(v, p); break;
  }
}

// Integers into float32 (exact for every type here but int32's largest).
template <typename T>
void IntsToFloats(const uint8_t* src, uint64_t n, float* dst) {
  for (uint64_t k = 0; k < n; ++k) {
    T v;
    std::memcpy(&v, src + k * sizeof(T), sizeof(T));
    dst[k] = static_cast<float>(v);
  }
}

void HalvesToFloats(const uint8_t* src, uint64_t n, float* dst);
void FloatsToHalves(const float* src, uint64_t n, uint8_t* dst);

void HalvesToFloatsScalar(const uint8_t* src, uint64_t n, float* dst) {
  for (uint64_t k = 0; k < n; ++k) {
    uint16_t h;
    std::memcpy(&h, src + 2 * k, 2);
    dst[k] = HalfToFloat(h);
  }
}

void FloatsToHalvesScalar(const float* src, uint64_t n, uint8_t* dst) {
  for (uint64_t k = 0; k < n; ++k) Store(FloatToHalf(src[k]), dst + 2 * k);
}

#if defined(__x86_64__)
// F16C converts 8 at a time, rounding to nearest even like FloatToHalf.
__attribute__((target("avx,f16c"))) void HalvesToFloatsF16C(const uint8_t* src, uint64_t n,
                                                            float* dst) {
  uint64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * k));
    _mm256_storeu_ps(dst + k, _mm256_cvtph_ps(h));
  }
  HalvesToFloatsScalar(src + 2 * k, n - k, dst + k);
}

__attribute__((target("avx,f16c"))) void FloatsToHalvesF16C(const float* src, uint64_t n,
                                                            uint8_t* dst) {
  uint64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + k),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * k), h);
  }
  FloatsToHalvesScalar(src + k, n - k, dst + 2 * k);
}

bool HasF16C() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  }();
  return has;
}

void HalvesToFloats(const uint8_t* src, uint64_t n, float* dst) {
  HasF16C() ? HalvesToFloatsF16C(src, n, dst) : HalvesToFloatsScalar(src, n, dst);
}
void FloatsToHalves(const float* src, uint64_t n, uint8_t* dst) {
  HasF16C() ? FloatsToHalvesF16C(src, n, dst) : FloatsToHalvesScalar(src, n, dst);
}
#else
void HalvesToFloats(const uint8_t* src, uint64_t n, float* dst) {
  HalvesToFloatsScalar(src, n, dst);
}
void FloatsToHalves(const float* src, uint64_t n, uint8_t* dst) {
  FloatsToHalvesScalar(src, n, dst);
}
#endif

// Integers into a wider integer type that holds every value: a plain cast.
template <typename From, typename To>
void Widen(const uint8_t* src, uint64_t n, uint8_t* dst) {
  for (uint64_t k = 0; k < n; ++k) {
    From v;
    std::memcpy(&v, src + k * sizeof(From), sizeof(From));
    const To w = static_cast<To>(v);
    std::memcpy(dst + k * sizeof(To), &w, sizeof(To));
  }
}

template <typename From>
bool WidenTo(const uint8_t* src, uint64_t n, uint8_t* dst, ElemType to) {
  constexpr bool is_signed = std::is_signed_v<From>;
  switch (to) {
    case ElemType::kInt16:
      if (sizeof(From) >= 2) return false;
      Widen<From, int16_t>(src, n, dst);
      return true;
    case ElemType::kUint16:
      if (sizeof(From) >= 2 || is_signed) return false;
      Widen<From, uint16_t>(src, n, dst);
      return true;
    case ElemType::kInt32:
      if (sizeof(From) >= 4) return false;
      Widen<From, int32_t>(src, n, dst);
      return true;
    case ElemType::kInt64:
      if (sizeof(From) >= 8) return false;
      Widen<From, int64_t>(src, n, dst);
      return true;
    default: return false;
  }
}

// An integer run into a wider integer type (the fast pairs), or false.
bool WidenInts(const uint8_t* src, ElemType from, uint64_t n, uint8_t* dst, ElemType to) {
  switch (from) {
    case ElemType::kInt8: return WidenTo<int8_t>(src, n, dst, to);
    case ElemType::kUint8: return WidenTo<uint8_t>(src, n, dst, to);
    case ElemType::kInt16: return WidenTo<int16_t>(src, n, dst, to);
    case ElemType::kUint16: return WidenTo<uint16_t>(src, n, dst, to);
    case ElemType::kInt32: return WidenTo<int32_t>(src, n, dst, to);
    default: return false;
  }
}

// float32 into `to` through a float32 run at `src` (the fast pairs), or
// false where the general path must convert.
bool FromFloats(const float* src, uint64_t n, uint8_t* dst, ElemType to) {
  switch (to) {
    case ElemType::kFloat32: std::memcpy(dst, src, n * 4); return true;
    case ElemType::kFloat16: FloatsToHalves(src, n, dst); return true;
    case ElemType::kBfloat16:
      for (uint64_t k = 0; k < n; ++k) Store(FloatToBfloat16(src[k]), dst + 2 * k);
      return true;
    default: return false;
  }
}

// `from` into float32 (the fast pairs), or false.
bool ToFloats(const uint8_t* src, ElemType from, uint64_t n, float* dst) {
  switch (from) {
    case ElemType::kFloat32: std::memcpy(dst, src, n * 4); return true;
    case ElemType::kFloat16: HalvesToFloats(src, n, dst); return true;
    case ElemType::kBfloat16:
      for (uint64_t k = 0; k < n; ++k) {
        uint16_t b;
        std::memcpy(&b, src + 2 * k, 2);
        dst[k] = Bfloat16ToFloat(b);
      }
      return true;
    case ElemType::kInt8: IntsToFloats<int8_t>(src, n, dst); return true;
    case ElemType::kUint8: IntsToFloats<uint8_t>(src, n, dst); return true;
    case ElemType::kInt16: IntsToFloats<int16_t>(src, n, dst); return true;
    case ElemType::kUint16: IntsToFloats<uint16_t>(src, n, dst); return true;
    case ElemType::kFloat64:
      for (uint64_t k = 0; k < n; ++k) {
        double d;
        std::memcpy(&d, src + k * 8, 8);
        dst[k] = static_cast<float>(d);
      }
      return true;
    default: return false;
  }
}

}  // namespace

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t abs = x & 0x7fffffff;
  if (abs >= 0x7f800000) {  // Inf or NaN.
    return static_cast<uint16_t>(sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0));
  }
  if (abs >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // Overflow.
  if (abs < 0x38800000) {  // Subnormal half (or zero).
    float a;
    std::memcpy(&a, &abs, 4);
    // Scale so the half's subnormal unit (2^-24) becomes 1, round to even.
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 16777216.0f)));
  }
  // Normal: rebias the exponent, round the mantissa to 10 bits, ties to even.
  uint32_t h = ((abs - 0x38000000) >> 13);
  const uint32_t rest = abs & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // Subnormal: normalize.
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToBfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return 0x7fc0;  // NaN.
  // Round the low 16 bits away, ties to even (inf stays inf; the largest
  // finite values round up to it).
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

float Bfloat16ToFloat(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

void ConvertRun(const uint8_t* src, ElemType from, uint64_t n, uint8_t* dst, ElemType to) {
  if (n == 0) return;
  if (from == to) {
    // Plain stores: non-temporal ones measured half as fast here (the
    // slot's lines are soon written again, by the next batch).
    if (src != dst) std::memcpy(dst, src, n * ElemBytes(from));
    return;
  }
  if (to == ElemType::kFloat32 && ToFloats(src, from, n, reinterpret_cast<float*>(dst))) return;
  if (WidenInts(src, from, n, dst, to)) return;
  if (from == ElemType::kFloat32 && FromFloats(reinterpret_cast<const float*>(src), n, dst, to))
    return;
  const bool exact_in_float32 = from == ElemType::kFloat16 || from == ElemType::kBfloat16 ||
                                from == ElemType::kInt8 || from == ElemType::kUint8 ||
                                from == ElemType::kInt16 || from == ElemType::kUint16;
  if (exact_in_float32 && (to == ElemType::kFloat16 || to == ElemType::kBfloat16)) {
    // Into a 16-bit float through float32 blocks: one rounding, as by value.
    float block[256];
    for (uint64_t k = 0; k < n; k += 256) {
      const uint64_t m = n - k < 256 ? n - k : 256;
      ToFloats(src + k * ElemBytes(from), from, m, block);
      FromFloats(block, m, dst + k * ElemBytes(to), to);
    }
    return;
  }
  const int fb = ElemBytes(from), tb = ElemBytes(to);
  for (uint64_t k = 0; k < n; ++k) StoreAny(LoadAny(src + k * fb, from), dst + k * tb, to);
}

}  // namespace stoker
