#include "server/daemon/flag_types.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(ByteSizeTest, UnitsAndErrors) {
  std::string err;
  ByteSize s;
  for (auto [text, bytes] : {std::pair{"2G", 2ULL << 30}, std::pair{"512M", 512ULL << 20},
                             std::pair{"64Ki", 64ULL << 10}, std::pair{"1TB", 1ULL << 40},
                             std::pair{"1048576", 1048576ULL}, std::pair{"0", 0ULL},
                             std::pair{" 3gib ", 3ULL << 30}}) {
    ASSERT_TRUE(AbslParseFlag(text, &s, &err)) << text << ": " << err;
    EXPECT_EQ(s.bytes, bytes) << text;
  }
  for (const char* bad : {"", "G", "2X", "-1", "1.5G", "99999999999T"}) {
    EXPECT_FALSE(AbslParseFlag(bad, &s, &err)) << bad;
    EXPECT_NE(err.find("is not a size"), std::string::npos);
  }
  EXPECT_EQ(AbslUnparseFlag(ByteSize{2ULL << 30}), "2G");
  EXPECT_EQ(AbslUnparseFlag(ByteSize{1000}), "1000");
}

TEST(FlagSpellingTest, DashesBecomeAbslNamesAndOldOnesStay) {
  std::vector<std::string> args = {"stokerd", "--l1-bytes=2G", "--allow-root",
                                   "--l2_path", "/x", "--", "--not-a-flag"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  std::vector<std::string> storage;
  NormalizeFlagSpelling("test", static_cast<int>(argv.size()), argv.data(), &storage);
  EXPECT_STREQ(argv[1], "--l1_bytes=2G");
  EXPECT_STREQ(argv[2], "--allow_root");
  EXPECT_STREQ(argv[3], "--l2_path");  // Old spelling: kept (and warned).
  EXPECT_STREQ(argv[4], "/x");
  EXPECT_STREQ(argv[6], "--not-a-flag");  // After "--": untouched.
}

}  // namespace
}  // namespace stoker
