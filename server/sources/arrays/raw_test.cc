// The raw kind through the registry, as the daemon opens it: records of a
// token file and of a headed float file read back exactly; every malformed
// spec or file a clear error naming it; a FIFO, a huge sparse file, a path
// outside the caller's folder and the daemon's own file refused without
// reading.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/sources/source.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

v1::DatasetSpec Raw(const std::string& path, const std::string& dtype,
                    std::vector<uint64_t> shape, uint64_t header = 0) {
  v1::DatasetSpec spec;
  spec.mutable_raw()->set_path(path);
  spec.mutable_raw()->set_dtype(dtype);
  for (uint64_t d : shape) spec.mutable_raw()->add_shape(d);
  spec.mutable_raw()->set_header_bytes(header);
  return spec;
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// Record `i` of `ds`, whole, as T.
template <typename T>
std::vector<T> Record(const Dataset& ds, size_t i, ElemType type) {
  const ArraySource* a = ds.source->arrays();
  const std::vector<uint64_t>& shape = a->shape(i);
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  std::vector<T> out(n);
  const std::vector<uint64_t> start(shape.size(), 0);
  EXPECT_TRUE(a->Read(i, start.data(), shape.data(), type,
                      reinterpret_cast<uint8_t*>(out.data()))
                  .ok());
  return out;
}

TEST(RawTest, TokenRecordsAreTheFilesWindows) {
  const std::string dir = testdata::MakeTempDir("raw-tokens");
  std::vector<uint16_t> tokens(12 * 8);
  for (size_t k = 0; k < tokens.size(); ++k) tokens[k] = (k * 7919 + k / 8 * 31) % 50257;
  ASSERT_TRUE(testdata::WriteFile(dir + "/train.bin", Bytes(tokens)).ok());
  absl::StatusOr<Dataset> ds =
      OpenDataset(Raw(dir + "/train.bin", "uint16", {8}), SourceContext());
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->sample_count(), 12u);
  EXPECT_EQ(ds->description, "raw:" + dir + "/train.bin");
  EXPECT_EQ(ds->source->arrays()->Name(3), dir + "/train.bin[3]");
  EXPECT_EQ(ds->source->arrays()->type(), ElemType::kUint16);
  for (size_t i : {0, 5, 11}) {
    EXPECT_EQ(Record<uint16_t>(*ds, i, ElemType::kUint16),
              std::vector<uint16_t>(tokens.begin() + i * 8, tokens.begin() + i * 8 + 8))
        << i;
  }
  // As the rows of one array, for whole-sample copies.
  std::vector<RowSpan> spans = ds->source->arrays()->RowSpans(0);
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].rows, 12u);
  EXPECT_EQ(spans[0].row_bytes, 16u);
  std::filesystem::remove_all(dir);
}

TEST(RawTest, AHeaderIsSkippedAndRecordsMayHaveSeveralDimensions) {
  const std::string dir = testdata::MakeTempDir("raw-header");
  std::vector<float> values(5 * 2 * 3);
  for (size_t k = 0; k < values.size(); ++k) values[k] = 0.25f * k - 3.0f;
  ASSERT_TRUE(testdata::WriteFile(dir + "/x.f32", std::string(24, 'H') + Bytes(values)).ok());
  absl::StatusOr<Dataset> ds =
      OpenDataset(Raw(dir + "/x.f32", "float32", {2, 3}, 24), SourceContext());
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->sample_count(), 5u);
  EXPECT_EQ(ds->source->arrays()->shape(4), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(Record<float>(*ds, 4, ElemType::kFloat32),
            std::vector<float>(values.begin() + 24, values.end()));
  // Read as another type, converted by value.
  EXPECT_EQ(Record<int32_t>(*ds, 4, ElemType::kInt32), (std::vector<int32_t>{3, 3, 3, 3, 4, 4}));
  std::filesystem::remove_all(dir);
}

TEST(RawTest, MalformedSpecsAndFilesAreClearErrors) {
  const std::string dir = testdata::MakeTempDir("raw-bad");
  const std::string file = dir + "/t.bin";
  ASSERT_TRUE(testdata::WriteFile(file, std::string(100, '\1')).ok());
  struct Case {
    v1::DatasetSpec spec;
    absl::StatusCode code;
    std::string says;
  };
  const Case cases[] = {
      {Raw(file, "uint12", {4}), absl::StatusCode::kInvalidArgument, "dtype \"uint12\" is none"},
      {Raw(file, "uint8", {}), absl::StatusCode::kInvalidArgument, "shape needs 1 to 32"},
      {Raw(file, "uint8", std::vector<uint64_t>(33, 1)), absl::StatusCode::kInvalidArgument,
       "shape needs"},
      {Raw(file, "uint8", {4, 0}), absl::StatusCode::kFailedPrecondition, "no elements"},
      {Raw(file, "float64", {uint64_t{1} << 40, uint64_t{1} << 40}),
       absl::StatusCode::kFailedPrecondition, "exceeds"},
      {Raw(file, "int32", {8}), absl::StatusCode::kFailedPrecondition,
       "100 bytes are not a 0-byte header and whole records of 32 bytes (shape 8 of int32)"},
      {Raw(file, "uint8", {4}, 101), absl::StatusCode::kFailedPrecondition, "101-byte header"},
      {Raw(file, "uint8", {4}, 100), absl::StatusCode::kFailedPrecondition, "holds no records"},
      {Raw(dir + "/none.bin", "uint8", {4}), absl::StatusCode::kNotFound, "none.bin"},
      {Raw(file, "float32", {1}, 2), absl::StatusCode::kFailedPrecondition,
       "2-byte header leaves the float32 elements unaligned"},
      {Raw(dir, "uint8", {4}), absl::StatusCode::kFailedPrecondition, "only regular files"},
  };
  for (const Case& c : cases) {
    absl::Status s = OpenDataset(c.spec, SourceContext()).status();
    EXPECT_EQ(s.code(), c.code) << c.spec.ShortDebugString() << ": " << s;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << s;
  }
  std::filesystem::remove_all(dir);
}

TEST(RawTest, FifosSparseGiantsAndOtherFoldersAreRefused) {
  const std::string dir = testdata::MakeTempDir("raw-hostile");
  std::filesystem::create_directories(dir + "/in");
  std::filesystem::create_directories(dir + "/out");
  ASSERT_EQ(mkfifo((dir + "/in/fifo").c_str(), 0600), 0);
  // A FIFO is no file: refused at once, nothing waits for a writer.
  absl::Status fifo = OpenDataset(Raw(dir + "/in/fifo", "uint8", {4}), SourceContext()).status();
  EXPECT_EQ(fifo.code(), absl::StatusCode::kFailedPrecondition) << fifo;
  // 64 GiB of holes as 1-byte records: past the daemon's sample limit,
  // refused before a byte is read.
  const int fd = open((dir + "/in/sparse.bin").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, off_t{64} << 30), 0);
  close(fd);
  absl::Status giant =
      OpenDataset(Raw(dir + "/in/sparse.bin", "uint8", {1}), SourceContext()).status();
  EXPECT_EQ(giant.code(), absl::StatusCode::kResourceExhausted) << giant;
  // A confined caller reads only beneath its folder, and never the
  // daemon's own files, in its folder or through a symlink.
  ASSERT_TRUE(testdata::WriteFile(dir + "/out/secret.bin", std::string(64, 's')).ok());
  ASSERT_TRUE(testdata::WriteFile(dir + "/in/daemons.bin", std::string(64, 'd')).ok());
  ASSERT_TRUE(testdata::WriteFile(dir + "/in/mine.bin", std::string(64, 'm')).ok());
  std::filesystem::create_symlink(dir + "/in/daemons.bin", dir + "/in/link.bin");
  struct stat daemons;
  ASSERT_EQ(stat((dir + "/in/daemons.bin").c_str(), &daemons), 0);
  auto guard = std::make_shared<FileGuard>();
  guard->inodes.emplace_back(daemons.st_dev, daemons.st_ino);
  SourceContext confined;
  auto in = std::make_shared<Beneath>();
  in->dir_fd = open((dir + "/in").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  in->prefix = dir + "/in";
  in->guard = guard;
  confined.beneath = in;
  for (const std::string& path :
       {dir + "/in/../out/secret.bin", dir + "/in/daemons.bin", dir + "/in/link.bin"}) {
    absl::Status s = OpenDataset(Raw(path, "uint8", {4}), confined).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << path << ": " << s;
  }
  // Its own file beside them opens.
  absl::StatusOr<Dataset> mine = OpenDataset(Raw(dir + "/in/mine.bin", "uint8", {4}), confined);
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_EQ(mine->sample_count(), 16u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stoker
