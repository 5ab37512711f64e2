#include "client/cpp/child_process.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_split.h"

namespace stoker {
namespace {

using Words = std::vector<std::string>;

TEST(SplitCommandLineTest, QuotesAsPythonShlex) {
  EXPECT_EQ(*SplitCommandLine("  aws configure\texport-credentials  "),
            (Words{"aws", "configure", "export-credentials"}));
  EXPECT_EQ(*SplitCommandLine(R"(/opt/my tool 'a b' "c d" e\ f)"),
            (Words{"/opt/my", "tool", "a b", "c d", "e f"}));
  EXPECT_EQ(*SplitCommandLine(R"('it''s' "say \"hi\" \\ \n" x'y'"z" '')"),
            (Words{"its", R"(say "hi" \ \n)", "xyz", ""}));
  EXPECT_EQ(*SplitCommandLine(R"('\' \$ #not-a-comment)"), (Words{"\\", "$", "#not-a-comment"}));
  EXPECT_TRUE(SplitCommandLine("   ")->empty());
  EXPECT_EQ(SplitCommandLine("a 'b").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitCommandLine("a \"b\\").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitCommandLine("a \\").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RunChildTest, CollectsOutputAndStatus) {
  absl::StatusOr<ChildResult> r =
      RunChild({"sh", "-c", "echo out; echo err >&2; read x; echo \"[$x]\"; exit 3"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->end, ChildResult::End::kExited);
  EXPECT_EQ(r->code, 3);
  EXPECT_FALSE(r->succeeded());
  EXPECT_EQ(r->out, "out\n[]\n");  // stdin is /dev/null.
  EXPECT_EQ(r->err, "err\n");
  EXPECT_EQ(r->Describe({}), "exited 3");
  r = RunChild({"true"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->succeeded());
  r = RunChild({"sh", "-c", "kill -TERM $$"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->end, ChildResult::End::kSignalled);
  EXPECT_EQ(r->Describe({}), "was killed by signal 15");
}

TEST(RunChildTest, MissingProgramIsNotFound) {
  absl::Status s = RunChild({"stoker-no-such-program"}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("`stoker-no-such-program`"), std::string::npos) << s;
  EXPECT_EQ(RunChild({}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RunChildTest, CapsOutputs) {
  ChildLimits limits;
  limits.max_stdout = 1000;
  limits.max_stderr = 10;
  absl::StatusOr<ChildResult> r =
      RunChild({"sh", "-c", "head -c 5000 /dev/zero >&2; head -c 1000 /dev/zero"}, limits);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->succeeded());
  EXPECT_EQ(r->out.size(), 1000u);  // At the cap is still whole.
  EXPECT_EQ(r->err.size(), 10u);
  // Past it: killed, even though it would write forever.
  r = RunChild({"sh", "-c", "exec cat /dev/zero"}, limits);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->end, ChildResult::End::kStdoutTooLarge);
  EXPECT_EQ(r->out.size(), 1000u);
  EXPECT_EQ(r->Describe(limits), "wrote more than 1000 bytes to stdout and was killed");
}

// A session of its own: no terminal of the trainer's to read (and be
// stopped on), and the trainer's session untouched.
TEST(RunChildTest, RunsInASessionOfItsOwn) {
  absl::StatusOr<ChildResult> r =
      RunChild({"sh", "-c", "echo $$; cut -d' ' -f6 /proc/$$/stat"}, ChildLimits());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->succeeded()) << r->err;
  const std::vector<std::string> lines = absl::StrSplit(r->out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << r->out;
  EXPECT_EQ(lines[1], lines[0]);  // It leads its session.
  EXPECT_NE(lines[1], std::to_string(getsid(0)));
}

TEST(RunChildTest, KillsItsGroupAtTheTimeout) {
  ChildLimits limits;
  limits.timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  // A child of its own keeps the pipes open after the shell is killed.
  absl::StatusOr<ChildResult> r =
      RunChild({"sh", "-c", "echo partial >&2; sleep 60 & sleep 60"}, limits);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->end, ChildResult::End::kTimedOut);
  EXPECT_EQ(r->err, "partial\n");
  EXPECT_EQ(r->Describe(limits), "ran past 300ms and was killed");
  // A child that closed its output and goes on running.
  r = RunChild({"sh", "-c", "exec >&- 2>&-; sleep 60"}, limits);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->end, ChildResult::End::kTimedOut);
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

}  // namespace
}  // namespace stoker
