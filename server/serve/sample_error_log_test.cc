// A session's failed-sample log: each path once, a bounded number of
// paths, one line when it stops, and nothing shared between sessions.
#include "server/serve/sample_error_log.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(SampleErrorLog, EachPathOnceThenOneLineAtTheCap) {
  std::vector<std::string> lines;
  SampleErrorLog log("session 7", 3, [&](const std::string& l) { lines.push_back(l); });
  const absl::Status missing = absl::NotFoundError("no such file");
  for (int epoch = 0; epoch < 3; ++epoch) {
    log.Report("a.jpg", missing);
    log.Report("b.jpg", missing);
  }
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "session 7: sample failed (delivered as zeros, counted): \"a.jpg\": no such file");
  for (int i = 0; i < 10; ++i) log.Report(absl::StrCat("c", i, ".jpg"), missing);
  ASSERT_EQ(lines.size(), 4u);  // c0, then the cap's line; nothing after.
  EXPECT_EQ(lines[3],
            "session 7: over 3 samples failed; the rest are counted (stokerctl stats), not logged");
  EXPECT_EQ(log.kept(), 3u);
}

TEST(SampleErrorLog, AUsersBytesWriteNoLineOfTheirOwn) {
  std::vector<std::string> lines;
  SampleErrorLog log("session 3", 10, [&](const std::string& l) { lines.push_back(l); });
  log.Report("x.jpg\n[E] stokerd: forged\x1b[2J\"\\", absl::NotFoundError("isn't\r\nthere"));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "session 3: sample failed (delivered as zeros, counted): "
            "\"x.jpg\\n[E] stokerd: forged\\x1b[2J\\\"\\\\\": isn't\\r\\nthere");
  EXPECT_EQ(lines[0].find_first_of("\n\r\x1b"), std::string::npos);
}

TEST(SampleErrorLog, KeepsAHashPerPathNotThePath) {
  // 100,000 distinct 4 KiB paths: only the cap's worth of 8-byte hashes is
  // kept, however long and many the names.
  std::vector<std::string> lines;
  SampleErrorLog log("session 1", SampleErrorLog::kMaxLogged,
                     [&](const std::string& l) { lines.push_back(l); });
  const std::string prefix(4000, 'p');
  for (int i = 0; i < 100000; ++i) {
    log.Report(absl::StrCat(prefix, "/", i), absl::NotFoundError("gone"));
  }
  EXPECT_EQ(log.kept(), SampleErrorLog::kMaxLogged);
  EXPECT_EQ(lines.size(), SampleErrorLog::kMaxLogged + 1);
  // Another session's log starts empty: one session's failures never hide
  // another's.
  SampleErrorLog other("session 2", 5, [&](const std::string& l) { lines.push_back(l); });
  other.Report(absl::StrCat(prefix, "/", 0), absl::NotFoundError("gone"));
  EXPECT_EQ(other.kept(), 1u);
  EXPECT_EQ(lines.back().rfind("session 2: sample failed", 0), 0u) << lines.back();
}

}  // namespace
}  // namespace stoker
