// Operating a running daemon: live pool resizing, the per-session
// diagnosis, autotune, listing and closing sessions.
#include <atomic>
#include <filesystem>
#include <thread>

#include "client/cpp/read_summary.h"
#include "gtest/gtest.h"
#include "tests/folder_suite.h"
#include "tests/harness.h"
#include "tests/poll.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

using testing::TestDaemon;

class ControlTest : public testing::FolderSuite {
 protected:
  static DaemonOptions Options(int decode_threads) {
    DaemonOptions o;
    o.decode_threads = decode_threads;
    o.reader_threads = 8;
    o.decoded_cache_bytes = 0;
    return o;
  }
  // Waits up to `seconds` for fn(stats) to hold.
  static bool WaitFor(Client& c, double seconds,
                      const std::function<bool(const v1::DaemonStats&)>& fn) {
    const absl::Time end = absl::Now() + absl::Seconds(seconds);
    while (absl::Now() < end) {
      auto s = c.GetStats();
      if (s.ok() && fn(*s)) return true;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return false;
  }
};

TEST_F(ControlTest, ResizingPoolsDuringAReadKeepsTheChecksum) {
  uint64_t reference;
  {
    TestDaemon d(false, Options(2));
    auto c = d.Connect();
    auto s = c->OpenSession(Spec());
    ASSERT_TRUE(s.ok());
    reference = ReadBatches(**s, 3 * (*s)->batches_per_epoch())->checksum;
  }
  TestDaemon d(false, Options(2));
  auto c = d.Connect();
  auto s = c->OpenSession(Spec());
  ASSERT_TRUE(s.ok());
  std::atomic<bool> done{false};
  std::atomic<int> resizes{0};
  std::thread resizer([&] {
    auto admin = d.Connect();
    for (int i = 0; !done.load(); ++i) {
      EXPECT_TRUE(admin->ResizePool("decode", 1 + i % 4).ok());
      EXPECT_TRUE(admin->ResizePool("reader", 1 + (i * 7) % 16).ok());
      resizes.fetch_add(2);
      absl::SleepFor(absl::Milliseconds(15));
    }
  });
  // Mid-read (at the second batch) the reader waits for two rounds of
  // resizes, so they happen during the read however fast it is.
  int seen = 0;
  auto sum = ReadBatches(**s, 3 * (*s)->batches_per_epoch(), [&](const Batch&) {
    if (++seen != 2) return;
    const absl::Time until = absl::Now() + absl::Seconds(60);
    while (resizes.load() < 4 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(5));
  });
  done = true;
  resizer.join();
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(sum->checksum, reference);
  EXPECT_GE(resizes.load(), 4);
  EXPECT_EQ(c->ResizePool("gpu", 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->ResizePool("decode", 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto r = c->ResizePool("decode", 3);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->threads(), 3u);
  EXPECT_EQ(c->GetStats()->decode_threads(), 3u);
}

// Two sessions read on one decode thread, `a` taking `a_step` per batch
// (a training step) and `b` as fast as it can. Returns the samples the
// daemon decoded for each while the total went from 200 to 1,400: counted,
// not timed.
std::pair<uint64_t, uint64_t> DecodedSplit(TestDaemon& d, const v1::SessionSpec& a,
                                           const v1::SessionSpec& b,
                                           absl::Duration a_step) {
  auto c = d.Connect();
  auto sa = c->OpenSession(a);
  auto sb = c->OpenSession(b);
  EXPECT_TRUE(sa.ok() && sb.ok());
  if (!sa.ok() || !sb.ok()) return {0, 0};
  std::atomic<bool> done{false};
  auto read = [&](Session& s, absl::Duration step) {
    while (!done.load() && s.Next(absl::Seconds(30)).ok()) absl::SleepFor(step);
  };
  std::thread ta([&] { read(**sa, a_step); }), tb([&] { read(**sb, absl::ZeroDuration()); });
  // Samples each session had decoded, as the daemon counts them.
  auto decoded = [&](uint64_t* da, uint64_t* db) {
    auto st = c->GetStats();
    *da = *db = 0;
    for (const auto& ss : st->sessions()) {
      (ss.session_id() == (*sa)->id() ? *da : *db) = ss.samples_decoded();
    }
    return *da + *db;
  };
  uint64_t a0, b0, a1, b1;
  const absl::Duration limit = absl::Seconds(120), every = absl::Milliseconds(10);
  EXPECT_TRUE(testing::PollUntil([&] { return decoded(&a0, &b0) >= 200; }, limit, every));
  EXPECT_TRUE(testing::PollUntil([&] { return decoded(&a1, &b1) >= 1400; }, limit, every));
  done = true;
  (*sa)->Close().IgnoreError();
  (*sb)->Close().IgnoreError();
  ta.join();
  tb.join();
  return {a1 - a0, b1 - b0};
}

// Two fast readers share one decode thread. The first queues four times the
// work (batches of 16 against 4, 8 slots each); by turns they still get
// about equal samples (without turns: a quarter). With priority 3 (and
// slots enough to keep 3x the work queued) the second gets about three
// times the first's (without weights: the same). The bounds leave room for
// what a loaded machine does to a count this short: a reader, or a session's
// reads, held back for a while leave their turns to the other session, as
// they should. The exact shares are ThreadPoolTest's
// (UsersShareFirstThenTheirSessionsByWeight), counted task by task.
TEST_F(ControlTest, SessionsShareASaturatedPoolByPriority) {
  for (uint32_t priority : {1u, 3u}) {
    TestDaemon d(false, Options(1));
    v1::SessionSpec a = Spec(), b = Spec();
    a.set_batch_size(16);
    a.set_ring_slots(8);
    b.set_batch_size(4);
    b.set_ring_slots(priority == 1 ? 8 : 64);
    b.set_priority(priority);
    auto [na, nb] = DecodedSplit(d, a, b, absl::ZeroDuration());
    const double ratio = static_cast<double>(nb) / na;
    const double want = priority;
    EXPECT_GT(ratio, want * 0.6) << "priority " << priority;
    EXPECT_LT(ratio, want * 1.6) << "priority " << priority;
  }
}

// A session whose trainer is slow (its ring full most of the time) leaves
// the pool to the other: an idle session's turns go to the busy one.
TEST_F(ControlTest, ASlowConsumerLeavesThePoolToTheOther) {
  TestDaemon d(false, Options(1));
  auto [slow, fast] = DecodedSplit(d, Spec(), Spec(), absl::Milliseconds(100));
  EXPECT_GT(static_cast<double>(fast) / (slow + fast), 0.8)
      << "slow " << slow << ", fast " << fast;
}

TEST_F(ControlTest, DiagnosisSaysConsumerBoundWhenTheClientIsSlow) {
  TestDaemon d(false, Options(2));
  auto c = d.Connect();
  auto s = c->OpenSession(Spec());
  ASSERT_TRUE(s.ok());
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      if (!(*s)->Next(absl::Seconds(30)).ok()) return;
      absl::SleepFor(absl::Milliseconds(60));  // A busy GPU step.
    }
  });
  EXPECT_TRUE(WaitFor(*c, 15, [](const v1::DaemonStats& st) {
    return st.sessions_size() == 1 && st.sessions(0).diagnosis() == v1::DIAGNOSIS_CONSUMER_BOUND;
  }));
  auto list = c->ListSessions();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->sessions_size(), 1);
  EXPECT_EQ(list->sessions(0).session_id(), (*s)->id());
  EXPECT_GT(list->sessions(0).ring_fill(), 0.75);
  done = true;
  reader.join();
}

TEST_F(ControlTest, DiagnosisSaysDecodeBoundWithOneThreadAndAFastClient) {
  TestDaemon d(false, Options(1));
  auto c = d.Connect();
  auto s = c->OpenSession(Spec());
  ASSERT_TRUE(s.ok());
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load() && (*s)->Next(absl::Seconds(30)).ok()) {
    }
  });
  EXPECT_TRUE(WaitFor(*c, 15, [](const v1::DaemonStats& st) {
    return st.sessions_size() == 1 && st.sessions(0).diagnosis() == v1::DIAGNOSIS_DECODE_BOUND;
  }));
  auto st = c->GetStats();
  ASSERT_TRUE(st.ok());
  EXPECT_GT(st->sessions(0).client_wait_seconds(), 0.1);
  done = true;
  reader.join();
}

TEST_F(ControlTest, AutotuneGrowsUnderLoadAndShrinksForASlowClient) {
  DaemonOptions o = Options(1);
  o.autotune = true;
  o.max_decode_threads = 2;
  TestDaemon d(false, o);
  auto c = d.Connect();
  auto s = c->OpenSession(Spec());
  ASSERT_TRUE(s.ok());
  std::atomic<int> pause_ms{0};
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      if (!(*s)->Next(absl::Seconds(30)).ok()) return;
      if (int ms = pause_ms.load()) absl::SleepFor(absl::Milliseconds(ms));
    }
  });
  EXPECT_TRUE(WaitFor(*c, 20, [](const v1::DaemonStats& st) {
    return st.decode_threads() == 2;
  })) << "decode threads did not rise under load";
  pause_ms = 150;
  EXPECT_TRUE(WaitFor(*c, 25, [](const v1::DaemonStats& st) {
    return st.decode_threads() == 1;
  })) << "decode threads did not fall for a slow client";
  auto st = c->GetStats();
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->autotune());
  EXPECT_GE(st->autotune_changes(), 2u);
  done = true;
  reader.join();
}

}  // namespace
}  // namespace stoker
