#include "client/cpp/stats_text.h"

#include <string>

#include "gtest/gtest.h"

namespace stoker {
namespace {

bool HasLine(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

TEST(StatsTextTest, ASessionsRemoteReadsAndOrderAreItsLines) {
  v1::DaemonStats s;
  s.set_pid(42);
  s.set_version("1.2.3");
  s.set_decode_threads(2);
  s.set_numa("off");
  v1::SessionStats* ss = s.add_sessions();
  ss->set_session_id(7);
  ss->set_client_pid(99);
  ss->set_dataset("s3://b/train/");
  ss->set_remote_requests(252);
  ss->set_remote_bytes(6'640'000);
  v1::EpochRemote* e0 = ss->add_remote_by_epoch();
  e0->set_epoch(0);
  e0->set_requests(240);
  e0->set_bytes(6'350'000);
  v1::EpochRemote* e1 = ss->add_remote_by_epoch();
  e1->set_epoch(1);
  e1->set_requests(12);
  e1->set_bytes(290'000);
  v1::EpochOrder* o = ss->mutable_order();
  o->set_epoch(1);
  o->set_partitions(24);
  o->set_global_step(24);
  o->set_partitions_per_step(22.78);
  o->set_spread(0.3371);
  o->set_exchanged(4);
  o->set_exchange_by_bytes(true);
  const std::string text = StatsText(s);
  EXPECT_TRUE(HasLine(text, "stokerd pid 42, version 1.2.3, up 0 s, 2 decode threads, numa off"))
      << text;
  EXPECT_TRUE(HasLine(text, "    remote: 252 requests, 6.6 MB; epoch 0: 240 (6.3 MB), "
                            "epoch 1: 12 (0.3 MB)"))
      << text;
  EXPECT_TRUE(HasLine(text, "    order: epoch 1, 22.78 of 24 partitions a global step of 24, "
                            "spread 0.337, exchange 4 a partition by bytes"))
      << text;
  // No exchange: the order's line says nothing of one; by count otherwise.
  o->set_exchanged(0);
  EXPECT_TRUE(HasLine(StatsText(s), "    order: epoch 1, 22.78 of 24 partitions a global step "
                                    "of 24, spread 0.337"));
  o->set_exchanged(4);
  o->set_exchange_by_bytes(false);
  EXPECT_NE(StatsText(s).find(", exchange 4 a partition by count\n"), std::string::npos);
  o->set_exchange_by_bytes(true);
  o->set_exchange_over_budget(2);
  EXPECT_NE(StatsText(s).find(", exchange 4 a partition by bytes (2 partitions past its bound)\n"),
            std::string::npos);
  // Nothing remote and no order read: neither line.
  ss->clear_remote_by_epoch();
  ss->clear_order();
  const std::string plain = StatsText(s);
  EXPECT_EQ(plain.find("remote:"), std::string::npos);
  EXPECT_EQ(plain.find("order:"), std::string::npos);
  EXPECT_NE(plain.find("  session 7 pid 99: s3://b/train/"), std::string::npos);
}

}  // namespace
}  // namespace stoker
