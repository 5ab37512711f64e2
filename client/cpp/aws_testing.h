// A fixture for the tests of what reads AWS's conventions: a fresh home
// folder (removed afterwards), an environment of the test's own
// (`env_`, seen through getenv()) holding only HOME and
// AWS_EC2_METADATA_DISABLED=true (no test reaches for the instance
// metadata service unless it asks), and Write() for files in ~/.aws or
// anywhere below the home. FakeClock: a time the test moves by hand.
// Contains(text, part): an assertion that shows the text when it fails.
// KeyOrError(source): the key id a credential source's Get() gives, or
// its error's message. ConcurrentCalls: threads that each make one call, their answers
// collected as they come.
#ifndef STOKER_CLIENT_CPP_AWS_TESTING_H_
#define STOKER_CLIENT_CPP_AWS_TESTING_H_

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/cpp/aws_profile.h"

namespace stoker {

inline ::testing::AssertionResult Contains(absl::string_view text, absl::string_view part) {
  if (text.find(part) != absl::string_view::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "`" << part << "` is not in: " << text;
}

class FakeClock {
 public:
  explicit FakeClock(absl::Time start = absl::Now()) : now_(start) {}
  absl::Time Now() const {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Set(absl::Time t) {
    absl::MutexLock lock(&mu_);
    now_ = t;
  }
  // For the sources: reads this clock (which must outlive them).
  std::function<absl::Time()> clock() {
    return [this] { return Now(); };
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_;
};

template <typename Source>
std::string KeyOrError(Source* source) {
  auto c = source->Get();
  return c.ok() ? c->access_key_id : std::string(c.status().message());
}

class ConcurrentCalls {
 public:
  ConcurrentCalls(int n, const std::function<std::string()>& call) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this, call] {
        std::string answer = call();
        absl::MutexLock lock(&mu_);
        answers_.push_back(std::move(answer));
      });
    }
  }
  // Blocks until `n` calls have answered.
  void WaitFor(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return answers_.size() >= n; };
    mu_.Await(absl::Condition(&enough));
  }
  // Every answer, in the order they came, once all threads are done.
  std::vector<std::string> Join() {
    for (std::thread& t : threads_) t.join();
    absl::MutexLock lock(&mu_);
    return answers_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> answers_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

class AwsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    std::string tmpl = std::string(tmp != nullptr ? tmp : "/tmp") + "/stoker-aws-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    home_ = tmpl;
    env_["HOME"] = home_;
    env_["AWS_EC2_METADATA_DISABLED"] = "true";
  }
  void TearDown() override { std::system(("rm -rf '" + home_ + "'").c_str()); }

  // `text` at ~/.aws/`name` ("credentials", "config"), or at `name`
  // below the home where it holds a '/'; `mode` its permissions.
  std::string Write(const std::string& name, const std::string& text, mode_t mode = 0644) {
    const std::string path =
        name.find('/') == std::string::npos ? home_ + "/.aws/" + name : home_ + "/" + name;
    std::system(("mkdir -p '" + path.substr(0, path.rfind('/')) + "'").c_str());
    std::ofstream(path) << text;
    chmod(path.c_str(), mode);
    return path;
  }

  Getenv getenv() {
    return [this](const char* name) -> const char* {
      auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    };
  }

  std::string home_;
  std::map<std::string, std::string> env_;
};

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_AWS_TESTING_H_
