// The Lister against a store that misbehaves in ways moto cannot: one
// that answers the same page again, and one that never answers a page.
#include "server/sources/objects/s3_lister.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/objstore/loopback_testing.h"
#include "server/objstore/s3_client.h"

namespace stoker {
namespace {

// A loopback "store" on one thread: each request gets `reply`, or, when it
// is empty, no answer at all (the connection held open until the end).
class CannedStore {
 public:
  explicit CannedStore(std::string reply) : reply_(std::move(reply)) {
    listener_ = loopback_testing::Listen(&port_);
    thread_ = std::thread([this] { Loop(); });
  }
  ~CannedStore() {
    done_.store(true);
    thread_.join();
    for (const pollfd& p : fds_) ::close(p.fd);
  }
  std::string url() const { return absl::StrCat("http://127.0.0.1:", port_); }
  int requests() const { return requests_.load(); }

 private:
  void Loop() {
    fds_.push_back({listener_, POLLIN, 0});
    std::vector<std::string> in(1);
    while (!done_.load()) {
      if (::poll(fds_.data(), fds_.size(), 20) <= 0) continue;
      for (size_t i = 0; i < fds_.size(); ++i) {
        if ((fds_[i].revents & POLLIN) == 0) continue;
        if (i == 0) {
          const int c = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
          if (c >= 0) {
            fds_.push_back({c, POLLIN, 0});
            in.emplace_back();
          }
          continue;
        }
        char buf[4096];
        const ssize_t r = ::recv(fds_[i].fd, buf, sizeof buf, 0);
        if (r <= 0) {
          fds_[i].events = 0;  // Closed by the client: kept, unpolled.
          continue;
        }
        in[i].append(buf, static_cast<size_t>(r));
        for (size_t end; (end = in[i].find("\r\n\r\n")) != std::string::npos;) {
          in[i].erase(0, end + 4);
          ++requests_;
          if (!reply_.empty()) ::send(fds_[i].fd, reply_.data(), reply_.size(), MSG_NOSIGNAL);
        }
      }
    }
  }

  const std::string reply_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::vector<pollfd> fds_;
  std::atomic<bool> done_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

std::string Http(const std::string& body) {
  return absl::StrCat("HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nContent-Length: ",
                      body.size(), "\r\n\r\n", body);
}

struct ListerAt {
  explicit ListerAt(const CannedStore& store, ScanLimits l = {}) : limits(l) {
    S3Client::Options o;
    o.endpoints = *EndpointAllowList::Parse(store.url());
    client = *S3Client::Create(o);
    access.endpoint = *Endpoint::Parse(store.url());
    auto c = std::make_shared<S3Credentials>();
    c->access_key_id = "AKIATEST";
    c->secret_access_key = "secret";
    access.credentials = c;
  }
  S3Url url{"bkt", "train/"};
  ObjectStoreAccess access;
  ScanLimits limits;
  std::unique_ptr<S3Client> client;
};

TEST(ListerTest, AStoreAnsweringTheSamePageAgainIsDataLoss) {
  // Every page says there is more, from the same token.
  CannedStore store(Http(
      "<ListBucketResult><IsTruncated>true</IsTruncated>"
      "<NextContinuationToken>again</NextContinuationToken>"
      "<Contents><Key>train/a.jpg</Key><ETag>\"e\"</ETag><Size>1</Size></Contents>"
      "</ListBucketResult>"));
  ListerAt at(store);
  Lister lister(at.url, at.access, at.client.get(), at.limits);
  lister.BoundByStalls();  // Where pages with objects keep moving its clock.
  int pages = 0;
  absl::Status s = lister.Walk("train/", "", [&](ListPage&) {
    ++pages;
    return absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("the same page again"), std::string::npos) << s;
  EXPECT_EQ(pages, 1);  // The first; the second is the first's token again.
  EXPECT_EQ(store.requests(), 2);
}

TEST(ListerTest, APageInFlightEndsWithTheDeadline) {
  // A store that never answers: the page ends at the scan timeout, not
  // after the client's own minute per attempt.
  CannedStore store("");
  ScanLimits limits;
  limits.max_time = absl::Milliseconds(300);
  ListerAt at(store, limits);
  Lister lister(at.url, at.access, at.client.get(), at.limits);
  absl::StatusOr<ListPage> p = lister.Page("train/", "", "", 0);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kDeadlineExceeded) << p.status();
  EXPECT_NE(p.status().message().find("took longer than 300ms (--dataset-scan-timeout)"),
            std::string::npos)
      << p.status();
  // Bound by stalls: the same, as no page came.
  lister.BoundByStalls();
  p = lister.Page("train/", "", "", 0);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kDeadlineExceeded) << p.status();
  EXPECT_NE(p.status().message().find("no page came for 300ms"), std::string::npos)
      << p.status();
  // The daemon stopping ends it too.
  std::atomic<bool> cancel{false};
  limits.max_time = absl::Hours(1);
  limits.cancel = &cancel;
  ListerAt stopping(store, limits);
  Lister waiting(stopping.url, stopping.access, stopping.client.get(), stopping.limits);
  std::thread stopper([&] {
    for (const absl::Time until = absl::Now() + absl::Seconds(60);
         store.requests() < 3 && absl::Now() < until;) {
      std::this_thread::yield();  // Until its page is in flight.
    }
    cancel.store(true);
  });
  p = waiting.Page("train/", "", "", 0);
  stopper.join();
  EXPECT_EQ(p.status().code(), absl::StatusCode::kCancelled) << p.status();
}

}  // namespace
}  // namespace stoker
