// The conversions between the dtype table's types: the 16-bit floats' rounding
// against fixed patterns (torch's), the fast runs against the scalar rule over
// many values, and by-value conversions through the general path.
#include "server/imaging/elements.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace stoker {
namespace {

float Bits(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}
uint32_t BitsOf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return x;
}

TEST(ElementsTest, FloatToHalfRoundsToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);   // Largest half.
  EXPECT_EQ(FloatToHalf(70000.0f), 0x7c00);   // Overflow to inf.
  EXPECT_EQ(FloatToHalf(0.1f), 0x2e66);
  EXPECT_EQ(FloatToHalf(1.0f + 0x1p-11f), 0x3c00);        // Tie: to even.
  EXPECT_EQ(FloatToHalf(1.0f + 3 * 0x1p-11f), 0x3c02);    // Tie: to even.
  EXPECT_EQ(FloatToHalf(0x1p-24f), 0x0001);               // Smallest subnormal.
  EXPECT_EQ(FloatToHalf(0x1p-26f), 0x0000);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::quiet_NaN()), 0x7e00);
}

TEST(ElementsTest, FloatToBfloat16RoundsToNearestEvenAsTorch) {
  EXPECT_EQ(FloatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBfloat16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToBfloat16(-0.0f), 0x8000);
  EXPECT_EQ(FloatToBfloat16(1.0f + 0x1p-8f), 0x3f80);      // Tie: to even (down).
  EXPECT_EQ(FloatToBfloat16(1.0f + 3 * 0x1p-8f), 0x3f82);  // Tie: to even (up).
  EXPECT_EQ(FloatToBfloat16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);  // Past the tie.
  EXPECT_EQ(FloatToBfloat16(0.1f), 0x3dcd);
  EXPECT_EQ(FloatToBfloat16(std::numeric_limits<float>::max()), 0x7f80);  // Rounds to inf.
  EXPECT_EQ(FloatToBfloat16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(FloatToBfloat16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(FloatToBfloat16(Bits(0x00018000)), 0x0002);  // Subnormal tie: to even.
  EXPECT_EQ(FloatToBfloat16(std::numeric_limits<float>::quiet_NaN()), 0x7fc0);
  EXPECT_EQ(FloatToBfloat16(-std::numeric_limits<float>::quiet_NaN()), 0x7fc0);
  for (uint32_t b = 0; b < 0x10000; ++b) {  // Every pattern comes back.
    const float f = Bfloat16ToFloat(static_cast<uint16_t>(b));
    EXPECT_EQ(BitsOf(f), b << 16);
    if (!std::isnan(f)) {
      EXPECT_EQ(FloatToBfloat16(f), b);
    }
  }
}

TEST(ElementsTest, HalfRunsMatchTheScalarRuleOnEveryPattern) {
  // Every half into float32, in one run (vector blocks and a tail).
  std::vector<uint16_t> halves(0x10000 + 5);
  for (size_t k = 0; k < halves.size(); ++k) halves[k] = static_cast<uint16_t>(k);
  std::vector<float> floats(halves.size());
  ConvertRun(reinterpret_cast<const uint8_t*>(halves.data()), ElemType::kFloat16, halves.size(),
             reinterpret_cast<uint8_t*>(floats.data()), ElemType::kFloat32);
  for (size_t k = 0; k < halves.size(); ++k) {
    const float want = HalfToFloat(halves[k]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(floats[k])) << k;
    } else {
      EXPECT_EQ(BitsOf(floats[k]), BitsOf(want)) << k;
    }
  }
  // Float32 values of every kind back into halves: exact, ties, subnormal,
  // overflow, and random bit patterns.
  std::vector<float> in = {0.0f, -0.0f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 0x1p-24f,
                           0x1p-25f, 3 * 0x1p-25f, 65504.0f, 65519.0f, 65520.0f, 1e9f,
                           -std::numeric_limits<float>::infinity()};
  std::mt19937 rng(7);
  while (in.size() < 100003) {
    const float f = Bits(static_cast<uint32_t>(rng()));
    if (!std::isnan(f)) in.push_back(f);
  }
  std::vector<uint16_t> out(in.size());
  ConvertRun(reinterpret_cast<const uint8_t*>(in.data()), ElemType::kFloat32, in.size(),
             reinterpret_cast<uint8_t*>(out.data()), ElemType::kFloat16);
  for (size_t k = 0; k < in.size(); ++k) ASSERT_EQ(out[k], FloatToHalf(in[k])) << in[k];
}

TEST(ElementsTest, RunsConvertByValue) {
  const int16_t ints[] = {-32768, -1, 0, 1, 257, 32767};
  float f[6];
  ConvertRun(reinterpret_cast<const uint8_t*>(ints), ElemType::kInt16, 6,
             reinterpret_cast<uint8_t*>(f), ElemType::kFloat32);
  for (int k = 0; k < 6; ++k) EXPECT_EQ(f[k], static_cast<float>(ints[k]));
  // Into bfloat16: one rounding (257 is not a bfloat16: 256).
  uint16_t b[6];
  ConvertRun(reinterpret_cast<const uint8_t*>(ints), ElemType::kInt16, 6,
             reinterpret_cast<uint8_t*>(b), ElemType::kBfloat16);
  EXPECT_EQ(Bfloat16ToFloat(b[4]), 256.0f);
  EXPECT_EQ(Bfloat16ToFloat(b[0]), -32768.0f);
  // Integers into wider integers: the values.
  const int8_t narrow[] = {-128, -1, 0, 127};
  int16_t wide[4];
  ConvertRun(reinterpret_cast<const uint8_t*>(narrow), ElemType::kInt8, 4,
             reinterpret_cast<uint8_t*>(wide), ElemType::kInt16);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(wide[k], narrow[k]);
  const uint8_t bytes[] = {0, 200, 255};
  int64_t longs[3];
  ConvertRun(bytes, ElemType::kUint8, 3, reinterpret_cast<uint8_t*>(longs), ElemType::kInt64);
  EXPECT_EQ(longs[1], 200);
  // Signed into unsigned is no widening: saturated by value.
  uint16_t u16[4];
  ConvertRun(reinterpret_cast<const uint8_t*>(narrow), ElemType::kInt8, 4,
             reinterpret_cast<uint8_t*>(u16), ElemType::kUint16);
  EXPECT_EQ(u16[0], 0);
  EXPECT_EQ(u16[3], 127);
  // Floats into integers: toward zero, saturating, NaN is 0.
  const float vals[] = {-1.9f, 300.0f, -5.0f, std::numeric_limits<float>::quiet_NaN()};
  uint8_t u[4];
  ConvertRun(reinterpret_cast<const uint8_t*>(vals), ElemType::kFloat32, 4, u,
             ElemType::kUint8);
  EXPECT_EQ(u[0], 0);
  EXPECT_EQ(u[1], 255);
  EXPECT_EQ(u[2], 0);
  EXPECT_EQ(u[3], 0);
  // bfloat16 into float16 and back through float32's values.
  const uint16_t one_and_a_bit = FloatToBfloat16(1.0078125f);
  uint16_t h;
  ConvertRun(reinterpret_cast<const uint8_t*>(&one_and_a_bit), ElemType::kBfloat16, 1,
             reinterpret_cast<uint8_t*>(&h), ElemType::kFloat16);
  EXPECT_EQ(HalfToFloat(h), 1.0078125f);
  // float64 into float16 by value.
  const double d = 0.1;
  ConvertRun(reinterpret_cast<const uint8_t*>(&d), ElemType::kFloat64, 1,
             reinterpret_cast<uint8_t*>(&h), ElemType::kFloat16);
  EXPECT_EQ(h, 0x2e66);
}

}  // namespace
}  // namespace stoker
