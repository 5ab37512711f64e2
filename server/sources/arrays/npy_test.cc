#include "server/sources/arrays/npy.h"
#include "server/sources/arrays/npy_testing.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

std::string Header(const std::string& dict, int version = 1) {
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(version);
  out += '\0';
  const size_t len = dict.size();
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>(len >> 8);
  if (version >= 2) out += std::string(2, '\0');
  return out + dict;
}

TEST(NpyTest, ParsesWhatNumpyWrites) {
  const std::vector<float> data(2 * 3 * 4, 1.5f);
  const std::string bytes = NpyBytes(ElemType::kFloat32, {2, 3, 4}, data.data());
  auto h = ParseNpyHeader(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->type, ElemType::kFloat32);
  EXPECT_EQ(h->shape, (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(h->data_offset % 64, 0u);
  // Version 2 headers and scalars.
  std::string v2 = Header("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", 2);
  v2 += std::string(8, '\0');
  h = ParseNpyHeader(reinterpret_cast<const uint8_t*>(v2.data()), v2.size());
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_TRUE(h->shape.empty());
  EXPECT_EQ(h->type, ElemType::kInt64);
}

TEST(NpyTest, RejectsWhatItCannotReadAndSaysWhy) {
  struct Case {
    std::string bytes;
    const char* words;
  } cases[] = {
      {"PK\x03\x04 zip", "no \\x93NUMPY magic"},
      {Header("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }") +
           std::string(8, '\0'), "Fortran-order"},
      {Header("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }") +
           std::string(8, '\0'), "big-endian"},
      {Header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }"),
       "structured"},
      {Header("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }"),
       "not a plain number"},
      {Header("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 5), }") +
           std::string(79, '\0'), "needs 80 bytes"},
      {Header("{'descr': '<f4', 'fortran_order': False, 'shape': (x,), }"), "bad .npy shape"},
      {Header("{'descr': '<f4', 'shape': (2,), }"), "lacks 'fortran_order'"},
      {Header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 9), "version 9"},
      {Header("{'descr': '<f4', 'fortran_order': False, "
              "'shape': (4294967296, 4294967296, 4294967296), }"), "exceeds"},
      // 2^62 doubles: 2^65 bytes, 0 after a 64-bit wrap.
      {Header("{'descr': '<f8', 'fortran_order': False, "
              "'shape': (4611686018427387904,), }"), "exceeds"},
  };
  for (const Case& c : cases) {
    auto h = ParseNpyHeader(reinterpret_cast<const uint8_t*>(c.bytes.data()),
                            c.bytes.size());
    EXPECT_EQ(h.status().code(), absl::StatusCode::kFailedPrecondition) << c.words;
    EXPECT_NE(h.status().message().find(c.words), std::string::npos)
        << h.status().message() << " / wanted: " << c.words;
  }
}

// Rows the daemon would plan and name one by one: a zero-width row claims
// any count for free, so counts are capped and empty rows refused.
TEST(NpyTest, RowCountsAreCappedAndRowsMayNotBeEmpty) {
  const std::string dir = testdata::MakeTempDir("npy-rows");
  auto write = [&](const std::string& name, const std::string& shape) {
    const std::string path = dir + "/" + name;
    EXPECT_TRUE(testdata::WriteFile(
        path, Header("{'descr': '<f4', 'fortran_order': False, 'shape': (" + shape +
                     "), }")).ok());
    return path;
  };
  auto huge = OpenNpySource(write("huge.npy", "1099511627776, 0"), "", nullptr, nullptr);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  EXPECT_NE(huge.status().message().find("1099511627776 samples"), std::string::npos);
  auto empty = OpenNpySource(write("empty.npy", "5, 0"), "", nullptr, nullptr);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kFailedPrecondition) << empty.status();
  EXPECT_NE(empty.status().message().find("no elements"), std::string::npos);
  auto few = OpenNpySource(write("few.npy", "3, 0"), "", nullptr, nullptr, /*max_samples=*/2);
  EXPECT_EQ(few.status().code(), absl::StatusCode::kResourceExhausted);
  std::filesystem::remove_all(dir);
}

// A folder's files are found whatever the case of their suffix, or by
// their content when their names do not say; a FIFO is never opened to
// look (no read waits on it) and other files are left out.
TEST(NpyTest, FolderFilesByNameInAnyCaseOrByContent) {
  const std::string dir = testdata::MakeTempDir("npy-case");
  const std::vector<float> v(6, 1.5f);
  for (const char* name : {"/a.NPY", "/b.npy", "/c.Npy", "/d", "/e.bin"}) {
    ASSERT_TRUE(testdata::WriteFile(dir + name, NpyBytes(ElemType::kFloat32, {2, 3}, v.data())).ok());
  }
  ASSERT_TRUE(testdata::WriteFile(dir + "/notes.txt", "not an array").ok());
  ASSERT_EQ(mkfifo((dir + "/pipe").c_str(), 0600), 0);
  auto src = OpenNpySource(dir, "", nullptr, nullptr);
  ASSERT_TRUE(src.ok()) << src.status();
  ASSERT_EQ((*src)->size(), 5u);
  EXPECT_EQ((*src)->Name(0), dir + "/a.NPY");
  EXPECT_EQ((*src)->Name(3), dir + "/d");
  EXPECT_EQ((*src)->Name(4), dir + "/e.bin");
  EXPECT_EQ((*src)->shape(2), (std::vector<uint64_t>{2, 3}));
  for (const char* name : {"/a.NPY", "/b.npy", "/c.Npy", "/d", "/e.bin"}) {
    std::filesystem::remove_all(dir + name);
  }
  absl::Status none = OpenNpySource(dir, "", nullptr, nullptr).status();
  EXPECT_EQ(none.message(), dir + ": holds no .npy files (named so in any case, or by content)");
  std::filesystem::remove_all(dir);
}

// A label volume's foreground, read slab by slab (a volume of several
// slabs): exactly the elements != 0, NaN included and -0.0 not.
TEST(NpyTest, TheForegroundOfAVolumeIsItsNonZeroElements) {
  const std::string dir = testdata::MakeTempDir("npy-foreground");
  const std::vector<uint64_t> shape = {80, 90, 100};  // 5.8 MB as float64: 2 slabs.
  std::vector<float> v(80 * 90 * 100, 0.0f);
  std::vector<uint64_t> set;
  for (uint64_t k = 0; k < v.size(); ++k) {
    if (k % 1009 == 3) v[k] = 1.0f;
    if (k % 7919 == 5) v[k] = -0.0f;  // Zero.
    if (k == 700'001) v[k] = std::nanf("");
    if (k == 700'002) v[k] = 1e-40f;  // Denormal: not zero.
    if (v[k] != 0 || std::isnan(v[k])) set.push_back(k);
  }
  ASSERT_TRUE(testdata::WriteFile(dir + "/seg.npy",
                                  NpyBytes(ElemType::kFloat32, {80, 90, 100}, v.data()))
                  .ok());
  auto src = OpenNpySource(dir, "", nullptr, nullptr);
  ASSERT_TRUE(src.ok()) << src.status();
  ASSERT_EQ((*src)->shape(0), shape);
  absl::StatusOr<Foreground> fg = (*src)->ForegroundOf(0, 0);
  ASSERT_TRUE(fg.ok()) << fg.status();
  EXPECT_EQ(fg->elements(), v.size());
  ASSERT_EQ(fg->count(), set.size());
  for (size_t j = 0; j < set.size(); ++j) ASSERT_EQ(fg->Positive(j), set[j]) << j;
  EXPECT_EQ(fg->Negative(0), 0u);
  EXPECT_EQ(fg->Negative(3), 4u);  // 3 is set.
  std::filesystem::remove_all(dir);
}

// A confined caller's folder is listed as its own open lists it: a
// symlinked folder leading out of it is followed, ".." is refused.
TEST(NpyTest, FoldersAreListedAsTheCallersOwnOpensListThem) {
  const std::string dir = testdata::MakeTempDir("npy-beneath");
  std::filesystem::create_directories(dir + "/in/vols");
  std::filesystem::create_directories(dir + "/out");
  const std::vector<float> v(6, 1.5f);
  for (const char* name : {"/in/vols/a.npy", "/out/secret.npy"}) {
    ASSERT_TRUE(testdata::WriteFile(dir + name, NpyBytes(ElemType::kFloat32, {2, 3}, v.data())).ok());
  }
  std::filesystem::create_directory_symlink(dir + "/out", dir + "/in/away");
  auto in = std::make_shared<Beneath>();
  in->dir_fd = open((dir + "/in").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  in->prefix = dir + "/in";
  auto src = OpenNpySource(dir + "/in/vols", "", in, nullptr);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_EQ((*src)->size(), 1u);
  auto away = OpenNpySource(dir + "/in/away", "", in, nullptr);
  ASSERT_TRUE(away.ok()) << away.status();
  EXPECT_EQ((*away)->size(), 1u);
  absl::Status up = OpenNpySource(dir + "/in/../out", "", in, nullptr).status();
  EXPECT_EQ(up.code(), absl::StatusCode::kPermissionDenied) << up;
  EXPECT_NE(up.message().find("leads outside"), std::string::npos) << up;
  EXPECT_EQ(OpenNpySource(dir + "/in/none", "", in, nullptr).status().code(),
            absl::StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stoker
