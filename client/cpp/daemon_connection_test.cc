// The version exchange's rule (a real daemon's side runs in every client
// test: it answers with util/version.h's protocol).
#include "client/cpp/daemon_connection.h"

#include "gtest/gtest.h"
#include "util/version.h"

namespace stoker {
namespace {

TEST(CheckDaemonProtocol, ThisReleasesDaemonServes) {
  EXPECT_TRUE(CheckDaemonProtocol(kVersion, kProtocol, "/run/stoker/stoker.sock").ok());
  EXPECT_TRUE(CheckDaemonProtocol("9.0.0", kProtocol + 1, "/run/stoker/stoker.sock").ok());
}

TEST(CheckDaemonProtocol, DaemonsTooOldToSayStillServeThisRelease) {
  EXPECT_TRUE(CheckDaemonProtocol("", 0, "/run/stoker/stoker.sock").ok());
}

TEST(CheckDaemonProtocol, AnOlderDaemonIsNamedWithTheWaysOut) {
  absl::Status s = CheckDaemonProtocol("", 0, "/run/stoker/stoker.sock", 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            std::string("stokerd (release unknown) at /run/stoker/stoker.sock speaks session "
                        "protocol 0; this client (stoker ") +
                kVersion +
                ") needs 1 or newer: update the node service, or (from Python) set "
                "STOKER_SOCKET=embedded to use that package's own daemon");
  s = CheckDaemonProtocol("0.1.0", 1, "/s.sock", 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("stokerd 0.1.0 at /s.sock speaks session protocol 1"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace stoker
