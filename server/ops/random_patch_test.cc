// random_patch: uniform windows, and label-biased windows centred on a
// voxel of the label array's foreground or background (MONAI's
// RandCropByPosNegLabel: start = clamp(voxel - shape // 2, 0, size - shape)).
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/pipeline/op_testing.h"

namespace stoker {
namespace {

constexpr uint64_t kX = 30, kY = 40, kZ = 50;  // The volume.
constexpr uint64_t kPX = 6, kPY = 8, kPZ = 10;   // The patch.

std::string Spec(const std::string& patch_extra, const std::string& more_ops = "") {
  return R"({"fields": [
      {"name": "image", "kind": "KIND_ARRAY", "dtype": "DTYPE_FLOAT32", "shape": [6, 8, 10]},
      {"name": "seg", "kind": "KIND_ARRAY", "dtype": "DTYPE_UINT8", "shape": [6, 8, 10],
       "file": 1}],
    "pipeline": [{"random_patch": {"shape": [6, 8, 10])" +
         patch_extra + "}}" + more_ops + "]}";
}

// A blob of foreground (a box) well inside the volume: 4 x 5 x 6 voxels.
bool InBlob(uint64_t x, uint64_t y, uint64_t z) {
  return x >= 12 && x < 16 && y >= 17 && y < 22 && z >= 20 && z < 26;
}

Foreground BlobForeground() {
  Foreground::Builder b(kX * kY * kZ);
  b.Add(kX * kY * kZ, [](uint64_t k) { return InBlob(k / (kY * kZ), k / kZ % kY, k % kZ); });
  return b.Finish();
}

// Which of `n` samples' patches are centred (start + shape // 2) on the
// blob; every start must fit the volume and be shared by both fields.
int CentredOnBlob(const Pipeline& p, const Foreground* fg, int n) {
  const std::vector<uint64_t> shape = {kX, kY, kZ};
  int centred = 0;
  for (int i = 0; i < n; ++i) {
    const auto starts = p.PlanArrays(shape, /*seed=*/5, /*epoch=*/1, i, nullptr, fg);
    EXPECT_EQ(starts[0], starts[1]);
    const std::vector<uint64_t>& s = starts[0];
    EXPECT_LE(s[0], kX - kPX);
    EXPECT_LE(s[1], kY - kPY);
    EXPECT_LE(s[2], kZ - kPZ);
    centred += InBlob(s[0] + kPX / 2, s[1] + kPY / 2, s[2] + kPZ / 2);
  }
  return centred;
}

TEST(RandomPatchTest, PositivePatchesAreCentredOnTheForeground) {
  absl::StatusOr<Pipeline> p = CompileJson(Spec(R"(, "label_bias": {"field": "seg", "neg": 0})"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->label_file(), 1);
  const Foreground fg = BlobForeground();
  // The blob is more than half a patch from every border: never shifted.
  EXPECT_EQ(CentredOnBlob(*p, &fg, 500), 500);
  // Every voxel of the blob is drawn, uniformly: each of 120 about 1/120.
  std::vector<int> hits(kX * kY * kZ, 0);
  for (int i = 0; i < 12000; ++i) {
    const auto s = p->PlanArrays({kX, kY, kZ}, 5, 2, i, nullptr, &fg)[0];
    ++hits[((s[0] + kPX / 2) * kY + s[1] + kPY / 2) * kZ + s[2] + kPZ / 2];
  }
  for (uint64_t k = 0; k < hits.size(); ++k) {
    if (InBlob(k / (kY * kZ), k / kZ % kY, k % kZ)) {
      EXPECT_NEAR(hits[k], 100, 50) << k;  // sd 10.
    } else {
      EXPECT_EQ(hits[k], 0) << k;
    }
  }
}

TEST(RandomPatchTest, NegativePatchesAreCentredOffTheForegroundOrShiftedInside) {
  absl::StatusOr<Pipeline> p = CompileJson(Spec(R"(, "label_bias": {"field": "seg", "pos": 0})"));
  ASSERT_TRUE(p.ok()) << p.status();
  const Foreground fg = BlobForeground();
  const std::vector<uint64_t> shape = {kX, kY, kZ};
  int shifted = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::vector<uint64_t> s = p->PlanArrays(shape, 5, 1, i, nullptr, &fg)[0];
    const bool at_border = s[0] == 0 || s[0] == kX - kPX || s[1] == 0 || s[1] == kY - kPY ||
                           s[2] == 0 || s[2] == kZ - kPZ;
    shifted += at_border;
    if (!at_border) {
      EXPECT_FALSE(InBlob(s[0] + kPX / 2, s[1] + kPY / 2, s[2] + kPZ / 2)) << i;
    }
  }
  // Voxels within half a patch of a border are shifted: about 1 - (24*32*40)/(30*40*50).
  EXPECT_NEAR(shifted, 2000 * (1 - 24.0 * 32 * 40 / (30 * 40 * 50)), 150);
}

TEST(RandomPatchTest, PosToNegIsTheShareOfPatchesOnTheForeground) {
  absl::StatusOr<Pipeline> p =
      CompileJson(Spec(R"(, "label_bias": {"field": "seg", "pos": 1, "neg": 3})"));
  ASSERT_TRUE(p.ok()) << p.status();
  const Foreground fg = BlobForeground();
  // 1:3, and background draws centre off the blob (shifts move them at
  // most half a patch, never into it from a border): 0.25 of 4000, sd 27.
  EXPECT_NEAR(CentredOnBlob(*p, &fg, 4000), 1000, 140);
  // Without label bias the blob's share is its volume's: 120 / 60000.
  absl::StatusOr<Pipeline> uniform = CompileJson(Spec(""));
  ASSERT_TRUE(uniform.ok());
  EXPECT_EQ(uniform->label_file(), -1);
  EXPECT_LT(CentredOnBlob(*uniform, nullptr, 4000), 40);
}

TEST(RandomPatchTest, AVolumeWithoutForegroundGivesBackgroundPatches) {
  absl::StatusOr<Pipeline> p = CompileJson(Spec(R"(, "label_bias": {"field": "seg"})"));
  ASSERT_TRUE(p.ok()) << p.status();
  Foreground::Builder b(kX * kY * kZ);
  b.Add(kX * kY * kZ, [](uint64_t) { return false; });
  const Foreground none = b.Finish();
  // Every voxel is background: centres anywhere, as uniform draws.
  std::set<std::vector<uint64_t>> starts;
  for (int i = 0; i < 300; ++i) starts.insert(p->PlanArrays({kX, kY, kZ}, 5, 1, i, nullptr, &none)[0]);
  EXPECT_GT(starts.size(), 290u);
  // A volume no larger than the patch in a dimension starts at 0 there.
  const auto s = p->PlanArrays({kPX, kY, kZ}, 5, 1, 0, nullptr, &none)[0];
  EXPECT_EQ(s[0], 0u);
}

TEST(RandomPatchTest, TheSameSampleDrawsTheSamePatch) {
  absl::StatusOr<Pipeline> p = CompileJson(Spec(R"(, "label_bias": {"field": "seg"})"));
  ASSERT_TRUE(p.ok());
  const Foreground fg = BlobForeground();
  int differ = 0;
  for (int i = 0; i < 50; ++i) {
    const auto a = p->PlanArrays({kX, kY, kZ}, 5, 3, i, nullptr, &fg);
    EXPECT_EQ(a, p->PlanArrays({kX, kY, kZ}, 5, 3, i, nullptr, &fg));  // Resumable.
    differ += a != p->PlanArrays({kX, kY, kZ}, 5, 4, i, nullptr, &fg);  // Another epoch.
  }
  EXPECT_GT(differ, 45);
}

TEST(RandomPatchTest, BadLabelBiasIsNamed) {
  struct Case {
    std::string extra, ops, message;
  } cases[] = {
      {R"(, "label_bias": {"field": "mask"})", "",
       "pipeline[0] (random_patch): label_bias field 'mask' is not one the op patches "
       "('image', 'seg')"},
      {R"(, "label_bias": {"field": "seg", "pos": 0, "neg": 0})", "",
       "pipeline[0] (random_patch): label_bias pos 0 and neg 0 must be finite, at least 0, "
       "and not both 0"},
      {R"(, "label_bias": {"field": "seg", "pos": -1})", "",
       "pipeline[0] (random_patch): label_bias pos -1 and neg 1 must be finite, at least 0, "
       "and not both 0"},
      {R"(, "label_bias": {"field": "seg"})",
       R"(, {"random_patch": {"shape": [6, 8, 10], "label_bias": {"field": "image"}}})",
       "pipeline[1] (random_patch): label_bias reads file 0 but an earlier op's reads file 1; "
       "a pipeline biases patches by one label array"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Pipeline> p = CompileJson(Spec(c.extra, c.ops));
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(p.status().message(), c.message);
  }
}

}  // namespace
}  // namespace stoker
