// The 3-D ops' geometry (server/ops/volume.h) and the ops over it, against
// references written out index by index (numpy.flip, numpy.rot90), and the
// value-stage ops' arithmetic.
#include "server/ops/volume.h"

#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "server/pipeline/op_testing.h"

namespace stoker {
namespace {

constexpr uint64_t kA = 3, kB = 4, kC = 4;  // A volume [3, 4, 4].

// Element (i, j, k) is its own row-major offset, so moves are visible.
std::vector<uint16_t> Volume() {
  std::vector<uint16_t> v(kA * kB * kC);
  for (size_t n = 0; n < v.size(); ++n) v[n] = static_cast<uint16_t>(n);
  return v;
}
uint16_t At(const std::vector<uint16_t>& v, uint64_t i, uint64_t j, uint64_t k) {
  return v[(i * kB + j) * kC + k];
}
uint8_t* Bytes(std::vector<uint16_t>& v) { return reinterpret_cast<uint8_t*>(v.data()); }

TEST(VolumeTest, FlipAxisIsNumpysFlip) {
  const std::vector<uint64_t> shape = {kA, kB, kC};
  const std::vector<uint16_t> in = Volume();
  for (size_t axis = 0; axis < 3; ++axis) {
    std::vector<uint16_t> out = in;
    FlipAxis(Bytes(out), shape, 2, axis);
    for (uint64_t i = 0; i < kA; ++i)
      for (uint64_t j = 0; j < kB; ++j)
        for (uint64_t k = 0; k < kC; ++k) {
          const uint64_t fi = axis == 0 ? kA - 1 - i : i, fj = axis == 1 ? kB - 1 - j : j,
                         fk = axis == 2 ? kC - 1 - k : k;
          ASSERT_EQ(At(out, i, j, k), At(in, fi, fj, fk)) << axis;
        }
  }
}

TEST(VolumeTest, Rot90IsNumpysRot90) {
  const std::vector<uint64_t> shape = {kA, kB, kC};
  const std::vector<uint16_t> in = Volume();
  // numpy.rot90(m, 1, axes=(1, 2))[i, j, k] = m[i, k, n - 1 - j]: one
  // quarter turn, applied k times.
  auto turn = [](const std::vector<uint16_t>& m) {
    std::vector<uint16_t> out(m.size());
    for (uint64_t i = 0; i < kA; ++i)
      for (uint64_t j = 0; j < kB; ++j)
        for (uint64_t k = 0; k < kC; ++k) out[(i * kB + j) * kC + k] = At(m, i, k, kB - 1 - j);
    return out;
  };
  std::vector<uint16_t> want = in;
  for (uint32_t k = 0; k < 4; ++k) {
    std::vector<uint16_t> out = in;
    Rot90(Bytes(out), shape, 2, k, 1, 2);
    EXPECT_EQ(out, want) << "k = " << k;
    // The other direction: axes (2, 1) turns back.
    Rot90(Bytes(out), shape, 2, k, 2, 1);
    EXPECT_EQ(out, in) << "k = " << k;
    want = turn(want);
  }
}

std::string Spec(const std::string& dtype, const std::string& ops) {
  return R"({"fields": [
      {"name": "image", "kind": "KIND_ARRAY", "dtype": ")" + dtype + R"(", "shape": [3, 4, 4]},
      {"name": "seg", "kind": "KIND_ARRAY", "dtype": "DTYPE_UINT16", "shape": [3, 4, 4],
       "file": 1}], "pipeline": [)" + ops + "]}";
}

TEST(VolumeTest, FlipsAndTurnsAreDrawnPerSampleAndSharedByTheFields) {
  absl::StatusOr<Pipeline> p = CompileJson(
      Spec("DTYPE_UINT16", R"({"axis_flip": {}}, {"rot90": {"axes": [1, 2], "probability": 1}})"));
  ASSERT_TRUE(p.ok()) << p.status();
  std::set<std::vector<uint16_t>> outcomes;
  for (uint64_t index = 0; index < 200; ++index) {
    const std::vector<uint16_t> image = RunArray<uint16_t>(*p, 0, Volume(), 1, 0, index);
    EXPECT_EQ(image, RunArray<uint16_t>(*p, 1, Volume(), 1, 0, index));  // Joint.
    outcomes.insert(image);
  }
  // 8 flip sets x 3 turns, some alike (flipping both axes of the plane is
  // a half turn): at least 12 distinct outcomes.
  EXPECT_GE(outcomes.size(), 12u);
}

TEST(VolumeTest, WindowIntensityAndNormalizeRunInOpOrder) {
  absl::StatusOr<Pipeline> p = CompileJson(Spec(
      "DTYPE_FLOAT32",
      R"({"window": {"min": -10, "max": 30}}, {"intensity": {"shift": {"min": 0.5, "max": 0.5}}},
         {"normalize": {"mean": [1], "std": [2]}})"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->fields()[1].is_float());
  const std::vector<float> in = {-20, -10, 0, 10, 30, 50, NAN};
  std::vector<float> values = in;
  values.resize(3 * 4 * 4, 0.0f);
  const std::vector<float> out = RunArray<float>(*p, 0, values, 1, 0, 0);
  for (size_t k = 0; k < in.size(); ++k) {
    const float w = std::min(std::max((in[k] + 10.0f) / 40.0f, 0.0f), 1.0f);
    const float want = ((w + 0.5f) - 1.0f) / 2.0f;
    if (std::isnan(in[k])) {
      EXPECT_TRUE(std::isnan(out[k]));
    } else {
      EXPECT_FLOAT_EQ(out[k], want) << in[k];
    }
  }
  // Normalize before the window: the window clips normalized values.
  p = CompileJson(Spec("DTYPE_FLOAT32", R"({"normalize": {"mean": [0], "std": [100]}},
                                          {"window": {"min": 0, "max": 0.1}})"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FLOAT_EQ(RunArray<float>(*p, 0, values, 1, 0, 0)[3], 1.0f);  // 10 / 100 = 0.1: top.
  EXPECT_FLOAT_EQ(RunArray<float>(*p, 0, values, 1, 0, 0)[2], 0.0f);
}

TEST(VolumeTest, BadParametersAreNamed) {
  struct Case {
    std::string ops, message;
  } cases[] = {
      {R"({"rot90": {"axes": [0, 1]}})",
       "pipeline[0] (rot90): field 'image' is 3 x 4 in the plane of axes [0, 1]; a quarter turn "
       "keeps the shape only of a square plane"},
      {R"({"rot90": {"axes": [1, 1]}})",
       "pipeline[0] (rot90): axes must be two different axes (a plane)"},
      {R"({"rot90": {"axes": [1, 2], "max_k": 4}})", "pipeline[0] (rot90): max_k 4 is not in 1..3"},
      {R"({"axis_flip": {"axes": [3]}})",
       "pipeline[0] (axis_flip): axis 3 is not one of field 'image' (3 dimensions)"},
      {R"({"axis_flip": {"probability": 2}})",
       "pipeline[0] (axis_flip): probability must be in 0..1"},
      {R"({"intensity": {}})", "pipeline[0] (intensity): changes nothing: set scale, shift or both"},
      {R"({"intensity": {"scale": {"min": 2, "max": 1}}})",
       "pipeline[0] (intensity): scale [2, 1] must satisfy -1e+06 <= min <= max <= 1e+06"},
      {R"({"window": {"min": 1, "max": 1}})",
       "pipeline[0] (window): window [1, 1] onto [0, 1]: both must be finite with min < max"},
      {R"({"window": {"min": 0, "max": 1}, "fields": ["seg"]})",
       "pipeline[0] (window): field 'seg' is a array of uint16; window applies to "
       "float32/float16/bfloat16 arrays"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Pipeline> p = CompileJson(Spec("DTYPE_FLOAT32", c.ops));
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << c.ops;
    EXPECT_EQ(p.status().message(), c.message);
  }
}

}  // namespace
}  // namespace stoker
