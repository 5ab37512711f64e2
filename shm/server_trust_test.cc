// Which daemons a client speaks to: root, its own uid and the node
// service's user as the environment or the `stoker` account names it, in a
// folder only those may write.
#include "shm/server_trust.h"

#include <unistd.h>

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace stoker::shm {
namespace {

// A user other than this process, root and the service, as an attacker is.
constexpr uid_t kOther = 54321;
constexpr uid_t kService = 9464;

std::function<const char*(const char*)> Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::optional<uid_t> Accounts(const std::string& name) {
  if (name == "stoker") return kService;
  if (name == "svc") return 777;
  return std::nullopt;
}

std::optional<uid_t> NoAccounts(const std::string&) { return std::nullopt; }

TEST(TrustedDaemons, TheStokerAccountIsTheServiceUnlessTheOperatorNamesOne) {
  absl::StatusOr<TrustedDaemons> t = TrustedDaemonsFromEnvironment(Env({}), Accounts);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->service, std::optional<uid_t>(kService));
  EXPECT_TRUE(t->Trusts(0));
  EXPECT_TRUE(t->Trusts(getuid()));
  EXPECT_TRUE(t->Trusts(kService));
  EXPECT_FALSE(t->Trusts(kOther));

  t = TrustedDaemonsFromEnvironment(Env({{"STOKER_DAEMON_USER", "svc"}}), Accounts);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->service, std::optional<uid_t>(777));
  EXPECT_FALSE(t->Trusts(kService));  // Named instead of the account.

  // A uid the trainer's container has no account for (a DaemonSet's).
  t = TrustedDaemonsFromEnvironment(Env({{"STOKER_DAEMON_USER", "9999"}}), NoAccounts);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->service, std::optional<uid_t>(9999));
  EXPECT_NE(t->Describe().find("(uid 9999)"), std::string::npos) << t->Describe();

  t = TrustedDaemonsFromEnvironment(Env({}), NoAccounts);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->service.has_value());
  EXPECT_FALSE(t->Trusts(kService));
  EXPECT_NE(t->Describe().find("STOKER_DAEMON_USER unset"), std::string::npos);
}

TEST(TrustedDaemons, AServiceUserThatIsNoUserIsAnError) {
  for (const char* bad : {"nobody-here", "-5", "12abc", "99999999999", "4294967295"}) {
    absl::StatusOr<TrustedDaemons> t =
        TrustedDaemonsFromEnvironment(Env({{"STOKER_DAEMON_USER", bad}}), Accounts);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition) << bad;
    EXPECT_NE(t.status().message().find(bad), std::string::npos) << t.status();
  }
}

TEST(CheckServer, OnlyTrustedServersInFoldersOnlyTheyWrite) {
  TrustedDaemons t;
  t.real = t.effective = 1000;
  t.service = kService;
  t.service_name = "stoker";
  const std::string sock = "/run/stoker/stoker.sock";
  // The node service in its own folder, root's, or the trainer's embedded
  // daemon in the trainer's folder.
  EXPECT_TRUE(CheckServer(sock, kService, 040750, kService, t).ok());
  EXPECT_TRUE(CheckServer(sock, 0, 040755, kService, t).ok());
  EXPECT_TRUE(CheckServer(sock, 1000, 040700, 1000, t).ok());
  EXPECT_TRUE(CheckServer(sock, 0, 040755, 0, t).ok());

  // Another user's daemon or relay in its own folder: what used to pass.
  absl::Status s = CheckServer(sock, kOther, 040755, kOther, t);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("belongs to uid 54321"), std::string::npos) << s;
  // ... or in a trusted folder (one made for it by mistake).
  s = CheckServer(sock, 0, 040755, kOther, t);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_NE(s.message().find("runs as uid 54321"), std::string::npos) << s;
  EXPECT_NE(s.message().find(sock), std::string::npos) << s;
  EXPECT_NE(s.message().find("stoker (uid 9464)"), std::string::npos) << s;
  // A trusted server in a folder others may write (they could swap it).
  for (mode_t mode : {040775, 040757, 041777}) {
    s = CheckServer(sock, kService, mode, kService, t);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  }
}

}  // namespace
}  // namespace stoker::shm
