// spec_augment: whole time and frequency bands masked, per sample.
#include <cmath>

#include "gtest/gtest.h"
#include "server/pipeline/op_testing.h"

namespace stoker {
namespace {

std::string Spec(const std::string& aug, const char* dtype = "DTYPE_FLOAT32",
                 const char* shape = "[100, 40]") {
  return std::string(R"({"fields": [{"name": "mel", "kind": "KIND_ARRAY", "dtype": ")") +
         dtype + R"(", "shape": )" + shape + R"(}], "pipeline": [{"spec_augment": )" + aug + "}]}";
}

// Features with structure (a slope per bin) and no value equal to the mask.
std::vector<float> Features(int rows, int cols) {
  std::vector<float> v(static_cast<size_t>(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) v[r * cols + c] = 1.0f + 0.01f * r + 0.5f * std::sin(c);
  }
  return v;
}

// Which rows and columns are wholly the mask value; every other element
// must be unchanged.
void Bands(const std::vector<float>& in, const std::vector<float>& out, int rows, int cols,
           float value, std::vector<bool>* row_masked, std::vector<bool>* col_masked) {
  row_masked->assign(rows, true);
  col_masked->assign(cols, true);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const bool masked = out[r * cols + c] == value;
      (*row_masked)[r] = (*row_masked)[r] && masked;
      (*col_masked)[c] = (*col_masked)[c] && masked;
    }
  }
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      if (!(*row_masked)[r] && !(*col_masked)[c]) {
        ASSERT_EQ(out[r * cols + c], in[r * cols + c]);
      }
    }
  }
}

int Runs(const std::vector<bool>& masked, int* widest) {
  int runs = 0, run = 0;
  *widest = 0;
  for (size_t i = 0; i <= masked.size(); ++i) {
    if (i < masked.size() && masked[i]) {
      runs += run++ == 0;
      *widest = std::max(*widest, run);
    } else {
      run = 0;
    }
  }
  return runs;
}

TEST(SpecAugmentTest, MasksWholeBandsWithinTheirWidths) {
  auto p = CompileJson(Spec(R"({"time_masks": 2, "time_width": 12, "freq_masks": 1,
                               "freq_width": 8, "value": -3})"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->deterministic());
  const std::vector<float> in = Features(100, 40);
  int masked_samples = 0, widest_time = 0;
  for (uint64_t index = 0; index < 200; ++index) {
    const std::vector<float> out = RunArray(*p, 0, in, 4, 2, index);
    std::vector<bool> rows, cols;
    Bands(in, out, 100, 40, -3.0f, &rows, &cols);
    int wt = 0, wf = 0;
    EXPECT_LE(Runs(rows, &wt), 2);
    EXPECT_LE(Runs(cols, &wf), 1);
    EXPECT_LE(wt, 2 * 11);  // Two bands of < 12 frames, possibly touching.
    EXPECT_LE(wf, 7);
    widest_time = std::max(widest_time, wt);
    masked_samples += wt > 0 || wf > 0;
    EXPECT_EQ(out, RunArray(*p, 0, in, 4, 2, index));  // Same sample, same masks.
  }
  EXPECT_GT(masked_samples, 190);
  EXPECT_GE(widest_time, 9);
}

TEST(SpecAugmentTest, FreqFirstAndHalfPrecision) {
  auto p = CompileJson(Spec(R"({"freq_masks": 3, "freq_width": 10, "freq_first": true})",
                            "DTYPE_FLOAT16", "[40, 100]"));
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<uint16_t> in(40 * 100, FloatToHalf(1.5f));
  int masked = 0;
  for (uint64_t index = 0; index < 50; ++index) {
    const std::vector<uint16_t> out = RunArray(*p, 0, in, 1, 0, index);
    // Frequency is the first axis here: masked bins are whole rows.
    for (int r = 0; r < 40; ++r) {
      const bool first = out[r * 100] == 0;
      masked += first;
      for (int c = 1; c < 100; ++c) ASSERT_EQ(out[r * 100 + c] == 0, first) << r << "," << c;
    }
  }
  EXPECT_GT(masked, 50);
}

TEST(SpecAugmentTest, BadParametersAreNamed) {
  const std::pair<std::string, const char*> bad[] = {
      {Spec("{}"), "masks nothing"},
      {Spec(R"({"time_masks": 17, "time_width": 2})"), "at most 16"},
      {Spec(R"({"time_masks": 1, "time_width": 101})"), "exceed field 'mel'"},
      {Spec(R"({"time_masks": 1, "time_width": 2})", "DTYPE_INT16"), "2-D float32/float16/bfloat16"},
      {Spec(R"({"time_masks": 1, "time_width": 2})", "DTYPE_FLOAT32", "[10, 10, 2]"),
       "2-D float32/float16/bfloat16"},
  };
  for (const auto& [spec, word] : bad) {
    auto p = CompileJson(spec);
    ASSERT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << spec;
    EXPECT_NE(p.status().message().find(word), std::string::npos) << p.status();
  }
}

}  // namespace
}  // namespace stoker
