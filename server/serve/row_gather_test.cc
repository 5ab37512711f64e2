#include "server/serve/row_gather.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/dataset/memory_source.h"
#include "server/serve/serving_testing.h"

namespace stoker {
namespace {

constexpr char kRows16[] =
    R"({"fields": [{"name": "x", "kind": "array", "dtype": "float32", "shape": [16]},
                   {"name": "label", "kind": "label", "dtype": "int32"}]})";

// A batch of `n` samples of the pipeline's fields, filled with 0xAB.
struct Batch {
  Batch(const std::vector<uint64_t>& bytes, size_t n) {
    for (uint64_t b : bytes) fields.emplace_back(b * n, 0xAB);
    for (size_t f = 0; f < fields.size(); ++f) out[f] = fields[f].data();
  }
  std::vector<std::vector<uint8_t>> fields;
  std::array<uint8_t*, shm::kMaxFields> out{};
};

// Sample i's array `file` as ReadArray gives it, as `to`.
std::vector<uint8_t> Reference(const ArraySource& src, size_t i, uint32_t file, ElemType to) {
  const std::vector<uint64_t>& shape = src.shape(i);
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  std::vector<uint8_t> row(n * ElemBytes(to));
  const std::vector<uint64_t> zero(shape.size(), 0);
  EXPECT_TRUE(src.ReadArray(i, file, zero.data(), shape.data(), to, row.data()).ok());
  return row;
}

std::vector<uint8_t> At(const Batch& b, size_t f, uint64_t bytes, size_t k) {
  return std::vector<uint8_t>(b.fields[f].begin() + k * bytes, b.fields[f].begin() + (k + 1) * bytes);
}

TEST(RowGatherTest, CopiesARunAcrossPartsInOrder) {
  absl::StatusOr<std::shared_ptr<const ArraySource>> src = ConcatArrays(
      {std::make_shared<MemoryArrays>(5, 16, std::vector<size_t>{}, 1, true),
       std::make_shared<MemoryArrays>(4, 16, std::vector<size_t>{}, 1, true)},
      {"a", "b"}, 100, "both");
  ASSERT_TRUE(src.ok()) << src.status();
  const Pipeline p = PipelineOf(kRows16);
  const std::vector<uint64_t> bytes = FieldBytesOf(p);
  std::unique_ptr<RowGather> g = RowGather::For(**src, p, bytes);
  ASSERT_NE(g, nullptr);
  const std::vector<uint64_t> indices = {7, 0, 8, 3, 5, 3};
  Batch b(bytes, indices.size());
  EXPECT_EQ(g->Copy(indices.data(), indices.size(), b.out), indices.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    EXPECT_EQ(At(b, 0, 64, k), Reference(**src, indices[k], 0, ElemType::kFloat32)) << k;
  }
  // Part b's row 2 is sample 7: its values say so.
  float first;
  std::memcpy(&first, b.fields[0].data(), 4);
  EXPECT_EQ(first, MemoryArrays::Value(0, 2, 0));
  // Labels are the caller's: untouched.
  EXPECT_EQ(b.fields[1], std::vector<uint8_t>(bytes[1] * indices.size(), 0xAB));
}

TEST(RowGatherTest, ConvertsToEachFieldsDtypeAndReadsEachFieldsFile) {
  auto src = std::make_shared<MemoryArrays>(6, 8, std::vector<size_t>{}, 2, true);
  const Pipeline p = PipelineOf(
      R"({"fields": [{"name": "x", "kind": "array", "dtype": "float16", "shape": [8]},
                     {"name": "y", "kind": "array", "dtype": "int32", "shape": [8], "file": 1}]})");
  const std::vector<uint64_t> bytes = FieldBytesOf(p);
  ASSERT_EQ(bytes, (std::vector<uint64_t>{16, 32}));
  std::unique_ptr<RowGather> g = RowGather::For(*src, p, bytes);
  ASSERT_NE(g, nullptr);
  const std::vector<uint64_t> indices = {5, 1, 4};
  Batch b(bytes, indices.size());
  ASSERT_EQ(g->Copy(indices.data(), indices.size(), b.out), 3u);
  for (size_t k = 0; k < indices.size(); ++k) {
    EXPECT_EQ(At(b, 0, 16, k), Reference(*src, indices[k], 0, ElemType::kFloat16)) << k;
    EXPECT_EQ(At(b, 1, 32, k), Reference(*src, indices[k], 1, ElemType::kInt32)) << k;
  }
  int32_t y;
  std::memcpy(&y, b.fields[1].data() + 32 + 4, 4);  // Sample 1, file 1, element 1.
  EXPECT_EQ(y, 100000 + 1000 + 1);
}

TEST(RowGatherTest, StopsAtTheFirstRowNoSpanHolds) {
  auto src = std::make_shared<MemoryArrays>(6, 16, std::vector<size_t>{3}, 1, true);
  const Pipeline p = PipelineOf(kRows16);
  const std::vector<uint64_t> bytes = FieldBytesOf(p);
  std::unique_ptr<RowGather> g = RowGather::For(*src, p, bytes);
  ASSERT_NE(g, nullptr);
  const std::vector<uint64_t> indices = {0, 5, 3, 1};
  Batch b(bytes, indices.size());
  EXPECT_EQ(g->Copy(indices.data(), indices.size(), b.out), 2u);
  EXPECT_EQ(At(b, 0, 64, 1), Reference(*src, 5, 0, ElemType::kFloat32));
  EXPECT_EQ(At(b, 0, 64, 2), std::vector<uint8_t>(64, 0xAB));  // Not written.
  EXPECT_EQ(g->Copy(&indices[2], 1, b.out), 0u);
  const uint64_t past = 6;
  EXPECT_EQ(g->Copy(&past, 1, b.out), 0u);
}

TEST(RowGatherTest, NoneUnlessEveryArrayFieldTakesWholeRowsAsTheyLie) {
  auto held = std::make_shared<MemoryArrays>(6, 16, std::vector<size_t>{}, 1, true);
  auto computed = std::make_shared<MemoryArrays>(6, 16);
  const Pipeline whole = PipelineOf(kRows16);
  EXPECT_NE(RowGather::For(*held, whole, FieldBytesOf(whole)), nullptr);
  EXPECT_EQ(RowGather::For(*computed, whole, FieldBytesOf(whole)), nullptr);  // No spans.
  const Pipeline wider = PipelineOf(
      R"({"fields": [{"name": "x", "kind": "array", "dtype": "float32", "shape": [32]}]})");
  EXPECT_EQ(RowGather::For(*held, wider, FieldBytesOf(wider)), nullptr);  // Another shape.
  const Pipeline scaled = PipelineOf(
      R"({"fields": [{"name": "x", "kind": "array", "dtype": "float32", "shape": [16]}],
          "pipeline": [{"intensity": {"scale": {"min": 2, "max": 2}}}]})");
  EXPECT_FALSE(scaled.whole_arrays());
  EXPECT_EQ(RowGather::For(*held, scaled, FieldBytesOf(scaled)), nullptr);  // An op.
}

// Rows of 1024 float32 (a page each) of a file mapped as the npy and HDF5
// kinds map theirs: its owner may cut it while the daemon copies.
class MappedRows : public ArraySource {
 public:
  explicit MappedRows(std::shared_ptr<const Mapping> map) : map_(std::move(map)) {}
  size_t size() const override { return map_->size / 4096; }
  ElemType type() const override { return ElemType::kFloat32; }
  const std::vector<uint64_t>& shape(size_t) const override { return shape_; }
  int64_t label(size_t) const override { return 0; }
  std::string Name(size_t i) const override { return absl::StrCat("mapped[", i, "]"); }
  absl::Status ReadArray(size_t i, uint32_t, const uint64_t* start, const uint64_t* count,
                         ElemType to, uint8_t* dst) const override {
    return MappedCopyRegion(Name(i), map_->data + i * 4096, ElemType::kFloat32, shape_, start,
                            count, dst, to);
  }
  std::vector<RowSpan> RowSpans(uint32_t) const override {
    return {RowSpan{0, size(), map_->data, 4096, ElemType::kFloat32, &shape_, true}};
  }

 private:
  const std::shared_ptr<const Mapping> map_;
  const std::vector<uint64_t> shape_{1024};
};

TEST(RowGatherTest, AFileCutUnderTheCopyEndsTheRunAtItsFirstLostRow) {
  char path[] = "/tmp/row_gather_testXXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::vector<float> values(8 * 1024);
  for (size_t j = 0; j < values.size(); ++j) values[j] = static_cast<float>(j);
  ASSERT_EQ(write(fd, values.data(), values.size() * 4), static_cast<ssize_t>(values.size() * 4));
  absl::StatusOr<std::shared_ptr<const Mapping>> map = MapFile(path, nullptr);
  ASSERT_TRUE(map.ok()) << map.status();
  MappedRows src(*map);
  const Pipeline p = PipelineOf(
      R"({"fields": [{"name": "x", "kind": "array", "dtype": "float32", "shape": [1024]}]})");
  std::unique_ptr<RowGather> g = RowGather::For(src, p, FieldBytesOf(p));
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(ftruncate(fd, 2 * 4096), 0);  // Rows 2.. are gone.
  close(fd);
  unlink(path);
  const std::vector<uint64_t> indices = {1, 0, 5, 1};
  Batch b({4096}, indices.size());
  EXPECT_EQ(g->Copy(indices.data(), indices.size(), b.out), 2u);
  EXPECT_EQ(std::memcmp(b.fields[0].data(), &values[1024], 4096), 0);
  EXPECT_EQ(std::memcmp(b.fields[0].data() + 4096, &values[0], 4096), 0);
  // The general read of the lost row is that sample's error.
  std::vector<uint8_t> row(4096);
  const uint64_t zero = 0, n = 1024;
  EXPECT_EQ(src.ReadArray(5, 0, &zero, &n, ElemType::kFloat32, row.data()).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(g->Copy(&indices[3], 1, b.out), 1u);  // The rows left still copy.
}

}  // namespace
}  // namespace stoker
