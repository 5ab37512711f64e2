// A real S3 API server for tests: moto_server on a free loopback port,
// with signature checking on. Its first unauthenticated calls create an
// IAM user with full rights and an access key (moto's
// INITIAL_NO_AUTH_ACTION_COUNT); every later request must be signed with
// that key, so a wrong secret fails as on AWS.
//
// moto_server is looked up in $STOKER_MOTO_SERVER (which `make test` sets
// to the one on PATH or in the machine image's pyenv), then PATH. Where
// none is found, Start() is FAILED_PRECONDITION saying so, and tests skip
// with that message.
//
// Known limits of moto's checker (not of the signer, whose canonical
// request follows the SigV4 specification byte for byte): a signed query
// value with a percent-encoded byte ('/' in a listing's delimiter, ',' in
// a prefix) and a key with non-ASCII bytes fail its check. Such requests
// run against a server started with `check_signatures = false`.
//
// One thread uses a MotoServer; the process is killed on destruction.
#ifndef STOKER_SERVER_OBJSTORE_MOTO_TESTING_H_
#define STOKER_SERVER_OBJSTORE_MOTO_TESTING_H_

#include <curl/curl.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/objstore/s3_client.h"

namespace stoker {
namespace moto_testing {

inline bool Executable(const std::string& p) {
  struct stat st;
  return !p.empty() && ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::access(p.c_str(), X_OK) == 0;
}

// `n` bytes with structure and noise, as a picture's.
inline std::string Content(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 7 / 3) ^ (rng() & 3));
  return s;
}

// Where moto_server is, or "": $STOKER_MOTO_SERVER (the Makefile finds
// it, and .bazelrc passes it to tests), else PATH.
inline std::string FindMotoServer() {
  if (const char* e = std::getenv("STOKER_MOTO_SERVER"); e != nullptr && Executable(e)) return e;
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      const std::string p = absl::StrCat(dir, "/moto_server");
      if (Executable(p)) return p;
    }
  }
  return "";
}

class MotoServer {
 public:
  // Starts moto_server and, with `check_signatures`, makes the IAM user
  // whose key credentials() holds.
  static absl::StatusOr<std::unique_ptr<MotoServer>> Start(bool check_signatures = true) {
    const std::string exe = FindMotoServer();
    if (exe.empty()) {
      return absl::FailedPreconditionError(
          "moto_server not found: run through make test, or set STOKER_MOTO_SERVER "
          "(deploy/install-deps.sh says where it comes from)");
    }
    // The child's environment, made before fork (setenv after it is not
    // async-signal-safe).
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      if (!absl::StartsWith(*e, "INITIAL_NO_AUTH_ACTION_COUNT=")) env.emplace_back(*e);
    }
    if (check_signatures) env.emplace_back("INITIAL_NO_AUTH_ACTION_COUNT=4");
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const char* argv[] = {exe.c_str(), "-H", "127.0.0.1", "-p", "0", nullptr};
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe");
    const pid_t pid = ::fork();
    if (pid < 0) return absl::InternalError("fork");
    if (pid == 0) {
      ::setpgid(0, 0);
      ::dup2(out[1], 2);
      ::dup2(out[1], 1);
      ::execve(exe.c_str(), const_cast<char**>(argv), envp.data());
      ::_exit(127);
    }
    ::close(out[1]);
    auto server = std::unique_ptr<MotoServer>(new MotoServer(pid, out[0]));
    // Werkzeug announces its port ("Running on http://127.0.0.1:PORT").
    std::string log;
    char buf[4096];
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    for (;;) {
      pollfd p{out[0], POLLIN, 0};
      const int left = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
      if (left <= 0 || ::poll(&p, 1, left) == 0) {
        return absl::UnavailableError(absl::StrCat("moto_server did not listen in 60 s: ", log));
      }
      const ssize_t r = ::read(out[0], buf, sizeof buf);
      if (r <= 0) {
        return absl::UnavailableError(absl::StrCat("moto_server ended before listening: ", log));
      }
      log.append(buf, static_cast<size_t>(r));
      const size_t at = log.find("Running on http://127.0.0.1:");
      if (at != std::string::npos) {
        const size_t start = at + sizeof("Running on http://127.0.0.1:") - 1;
        const size_t end = log.find_first_not_of("0123456789", start);
        uint32_t port = 0;
        if (end != std::string::npos &&
            absl::SimpleAtoi(log.substr(start, end - start), &port)) {
          server->port_ = static_cast<uint16_t>(port);
          break;
        }
      }
    }
    server->Drain();
    if (check_signatures) {
      if (absl::Status s = server->MakeUser(); !s.ok()) return s;
    } else {
      auto c = std::make_shared<S3Credentials>();
      c->access_key_id = "AKIAUNCHECKED";
      c->secret_access_key = "unchecked";
      server->credentials_ = std::move(c);
    }
    return server;
  }

  ~MotoServer() {
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    if (drain_.joinable()) drain_.join();
    ::close(log_);
  }

  uint16_t port() const { return port_; }
  Endpoint endpoint() const {
    Endpoint e;
    e.tls = false;
    e.host = "127.0.0.1";
    e.port = port_;
    return e;
  }
  std::shared_ptr<const S3Credentials> credentials() const { return credentials_; }

  // Writes `value` at bucket/key through `client` (key "" makes the bucket).
  absl::Status Put(S3Client* client, const std::string& bucket, const std::string& key,
                   std::string value) const {
    S3Request r;
    r.method = S3Request::Method::kPut;
    r.endpoint = endpoint();
    r.bucket = bucket;
    r.key = key;
    r.body = std::move(value);
    r.credentials = credentials_;
    return client->Run(std::move(r)).status;
  }

 private:
  MotoServer(pid_t pid, int log) : pid_(pid), log_(log) {}

  // Keeps reading the server's log so it never blocks on a full pipe.
  void Drain() {
    drain_ = std::thread([fd = log_] {
      char buf[4096];
      while (::read(fd, buf, sizeof buf) > 0) {
      }
    });
  }

  // One IAM query call (unsigned calls count against the free ones).
  absl::StatusOr<std::string> Iam(const std::string& form) {
    CURL* h = curl_easy_init();
    std::string reply;
    const std::string url = absl::StrCat("http://127.0.0.1:", port_, "/");
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, form.c_str());
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:iam");
    curl_easy_setopt(h, CURLOPT_USERPWD, "bootstrap:bootstrap");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION,
                     +[](char* d, size_t s, size_t n, void* u) {
                       static_cast<std::string*>(u)->append(d, s * n);
                       return s * n;
                     });
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &reply);
    const CURLcode c = curl_easy_perform(h);
    long http = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &http);
    curl_easy_cleanup(h);
    if (c != CURLE_OK || http != 200) {
      return absl::UnavailableError(absl::StrCat("moto IAM call ", form.substr(0, 40), ": ",
                                                 curl_easy_strerror(c), " HTTP ", http));
    }
    return reply;
  }

  static std::string Between(const std::string& s, const std::string& open) {
    const size_t a = s.find("<" + open + ">");
    if (a == std::string::npos) return "";
    const size_t start = a + open.size() + 2;
    return s.substr(start, s.find('<', start) - start);
  }

  absl::Status MakeUser() {
    const std::string v = "&Version=2010-05-08";
    absl::StatusOr<std::string> r = Iam("Action=CreateUser&UserName=trainer" + v);
    if (!r.ok()) return r.status();
    r = Iam("Action=CreateAccessKey&UserName=trainer" + v);
    if (!r.ok()) return r.status();
    auto c = std::make_shared<S3Credentials>();
    c->access_key_id = Between(*r, "AccessKeyId");
    c->secret_access_key = Between(*r, "SecretAccessKey");
    // {"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}
    r = Iam("Action=CreatePolicy&PolicyName=all" + v +
            "&PolicyDocument=%7B%22Version%22%3A%222012-10-17%22%2C%22Statement%22%3A%5B%7B%22"
            "Effect%22%3A%22Allow%22%2C%22Action%22%3A%22%2A%22%2C%22Resource%22%3A%22%2A%22%7D"
            "%5D%7D");
    if (!r.ok()) return r.status();
    r = Iam("Action=AttachUserPolicy&UserName=trainer&PolicyArn=" +
            Between(*r, "Arn") + v);
    if (!r.ok()) return r.status();
    if (c->access_key_id.empty() || c->secret_access_key.empty()) {
      return absl::InternalError("moto gave no access key");
    }
    credentials_ = std::move(c);
    return absl::OkStatus();
  }

  pid_t pid_;
  int log_;
  std::thread drain_;
  uint16_t port_ = 0;
  std::shared_ptr<const S3Credentials> credentials_;
};

// A client that may reach `moto` alone, and in *access its endpoint and
// its user's key: what an object store kind's test reads with.
inline std::unique_ptr<S3Client> ClientFor(const MotoServer& moto, ObjectStoreAccess* access) {
  S3Client::Options o;
  o.endpoints = *EndpointAllowList::Parse(moto.endpoint().ToString());
  access->endpoint = moto.endpoint();
  access->credentials = moto.credentials();
  return *S3Client::Create(o);
}

// A test against a moto_server with signature checks off (listings take
// a '/' delimiter its checker mishandles), a client for it, its access,
// and the empty bucket "bkt"; skipped without moto. A fixture's own SetUp
// calls this one first and returns when IsSkipped() or HasFatalFailure().
class BucketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<MotoServer>> m = MotoServer::Start(false);
    if (!m.ok()) GTEST_SKIP() << m.status();
    moto_ = *std::move(m);
    client_ = ClientFor(*moto_, &access_);
    ASSERT_TRUE(Put("", "").ok());
  }
  // PUT `value` at bkt/`key` ("": the bucket itself).
  absl::Status Put(const std::string& key, std::string value) {
    return moto_->Put(client_.get(), "bkt", key, std::move(value));
  }

  std::unique_ptr<MotoServer> moto_;
  std::unique_ptr<S3Client> client_;
  ObjectStoreAccess access_;
};

}  // namespace moto_testing
}  // namespace stoker

#endif  // STOKER_SERVER_OBJSTORE_MOTO_TESTING_H_
