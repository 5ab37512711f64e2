#include "server/dataset/array_source.h"

#include <fcntl.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/access/memory_budget.h"
#include "server/dataset/memory_source.h"
#include "tests/testdata.h"
#include "shm/ring_data.h"

namespace stoker {
namespace {

// Ring dtypes read as the file element type of the same name.
// What a confined caller's sources keep mapped is counted against its
// share: past it the next file is RESOURCE_EXHAUSTED by name, and a
// mapping given back makes room again.
TEST(MapFileTest, MappingsAreChargedToTheCallersShare) {
  const std::string dir = testdata::MakeTempDir("held");
  for (const char* name : {"a", "b", "c"}) {
    ASSERT_TRUE(testdata::WriteFile(dir + "/" + name + ".npy", "bytes").ok());
  }
  MemoryBudget budget(/*total=*/100, /*per_user=*/2);
  Beneath in;
  in.dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  in.prefix = dir;
  in.charge_held = [&](uint64_t n) { return budget.Charge(5, n); };
  auto a = MapFile(dir + "/a.npy", &in);
  auto b = MapFile(dir + "/b.npy", &in);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(budget.used_by(5), 2u);
  auto c = MapFile(dir + "/c.npy", &in);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("c.npy"), std::string::npos) << c.status();
  EXPECT_NE(c.status().message().find("--max-open-files-per-user"), std::string::npos);
  a->reset();
  c = MapFile(dir + "/c.npy", &in);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*c)->data), (*c)->size), "bytes");
  b->reset();
  c->reset();
  EXPECT_EQ(budget.used_by(5), 0u);
  std::filesystem::remove_all(dir);
}

// An array source's sample names are charged to the caller's list budget:
// past it the dataset is refused while being built.
TEST(ArrayDatasetTest, NamesAreChargedToTheListBudget) {
  auto rows = std::make_shared<MemoryArrays>(300000, 1, std::vector<size_t>{1});
  MemoryBudget budget(UINT64_MAX, 16 << 20);
  ScanLimits limits;
  limits.charge_list = [&](uint64_t bytes) { return budget.Charge(9, bytes); };
  auto refused = ArrayDataset(rows, "rows", limits);  // About 20 MB of names.
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_EQ(budget.used_by(9), 0u);
  {
    auto few = ArrayDataset(std::make_shared<MemoryArrays>(1000, 1, std::vector<size_t>{1}),
                            "rows", limits);
    ASSERT_TRUE(few.ok()) << few.status();
    EXPECT_GT(budget.used_by(9), 1000 * sizeof(Sample));
  }
  EXPECT_EQ(budget.used_by(9), 0u);
}

TEST(ElemTypeTest, EveryRingDTypeHasItsElementType) {
  for (const shm::DTypeInfo& d : shm::kElemTypes) {
    EXPECT_EQ(&shm::Elem(d.type), &d);  // The enum follows the rows.
    if (!d.is_field()) continue;
    EXPECT_STREQ(ElemName(FromRingDType(d.code)), d.name);
    EXPECT_EQ(static_cast<uint32_t>(ElemBytes(FromRingDType(d.code))), d.bytes);
  }
}

TEST(CopyRegionTest, CopiesRegionsAndConvertsByValue) {
  // A 3 x 4 x 5 array of its own linear index.
  std::vector<int16_t> a(60);
  for (int i = 0; i < 60; ++i) a[i] = static_cast<int16_t>(i - 30);
  const std::vector<uint64_t> shape{3, 4, 5};
  const uint64_t start[] = {1, 2, 1}, count[] = {2, 2, 3};
  std::vector<float> out(12);
  CopyRegion(reinterpret_cast<const uint8_t*>(a.data()), ElemType::kInt16, shape,
             start, count, reinterpret_cast<uint8_t*>(out.data()), ElemType::kFloat32);
  int k = 0;
  for (int z = 1; z < 3; ++z)
    for (int y = 2; y < 4; ++y)
      for (int x = 1; x < 4; ++x) EXPECT_EQ(out[k++], z * 20 + y * 5 + x - 30);
  // Saturating float -> int; NaN -> 0.
  const double src[] = {1e10, -1e10, 3.9, -3.9, std::nan("")};
  int8_t small[5];
  const std::vector<uint64_t> s1{5};
  const uint64_t zero = 0, five = 5;
  CopyRegion(reinterpret_cast<const uint8_t*>(src), ElemType::kFloat64, s1, &zero,
             &five, reinterpret_cast<uint8_t*>(small), ElemType::kInt8);
  EXPECT_EQ(small[0], 127);
  EXPECT_EQ(small[1], -128);
  EXPECT_EQ(small[2], 3);
  EXPECT_EQ(small[3], -3);
  EXPECT_EQ(small[4], 0);
}

// A box of one array into a box of another: converted by value, in its
// place, and nothing outside it written.
TEST(CopyBoxTest, PlacesABoxInsideAnotherArray) {
  std::vector<int16_t> a(60);  // 3 x 4 x 5, its own linear index - 30.
  for (int i = 0; i < 60; ++i) a[i] = static_cast<int16_t>(i - 30);
  const uint64_t from_shape[] = {3, 4, 5}, from_start[] = {1, 0, 2}, count[] = {2, 3, 2};
  const uint64_t to_shape[] = {4, 6, 7}, to_start[] = {2, 3, 5};
  std::vector<double> out(4 * 6 * 7, -1000.0);
  CopyBox(reinterpret_cast<const uint8_t*>(a.data()), ElemType::kInt16, from_shape, from_start,
          count, 3, reinterpret_cast<uint8_t*>(out.data()), ElemType::kFloat64, to_shape,
          to_start);
  int written = 0;
  for (int z = 0; z < 4; ++z) {
    for (int y = 0; y < 6; ++y) {
      for (int x = 0; x < 7; ++x) {
        const double got = out[(z * 6 + y) * 7 + x];
        const int dz = z - 2, dy = y - 3, dx = x - 5;
        if (dz >= 0 && dz < 2 && dy >= 0 && dy < 3 && dx >= 0 && dx < 2) {
          EXPECT_EQ(got, ((1 + dz) * 4 + dy) * 5 + 2 + dx - 30) << z << y << x;
          ++written;
        } else {
          EXPECT_EQ(got, -1000.0) << z << y << x;
        }
      }
    }
  }
  EXPECT_EQ(written, 12);
}

// Each volume is n samples in a row, read, named and labelled as it.
TEST(RepeatArraysTest, EachSampleIsRepeatedInARow) {
  auto base = std::make_shared<MemoryArrays>(3, 4, std::vector<size_t>{2});
  auto rep = RepeatArrays(base, 5, 100, "vols");
  ASSERT_TRUE(rep.ok()) << rep.status();
  ASSERT_EQ((*rep)->size(), 15u);
  const uint64_t start = 1, count = 2;
  for (size_t i = 0; i < 10; ++i) {
    float out[2];
    ASSERT_TRUE((*rep)->Read(i, &start, &count, ElemType::kFloat32,
                             reinterpret_cast<uint8_t*>(out)).ok());
    EXPECT_EQ(out[0], static_cast<float>(i / 5 * 1000 + 1)) << i;
    EXPECT_EQ((*rep)->label(i), static_cast<int64_t>(i / 5 % 3));
    EXPECT_EQ((*rep)->Name(i), absl::StrCat("rows[", i / 5, "]"));
  }
  EXPECT_EQ((*rep)->Broken(14).message(), "rows[2]: not an array");
  // n of 1 is the source itself; past the limit, named.
  EXPECT_EQ(RepeatArrays(base, 1, 100, "vols")->get(), base.get());
  EXPECT_EQ(RepeatArrays(base, 34, 100, "vols").status().message(),
            "vols holds 3 volumes x 34 samples per volume, over the daemon's limit of 100 "
            "samples (--max-dataset-files)");
}

}  // namespace
}  // namespace stoker
