// S3Client against a store on loopback that drips, stalls or fails
// (drip_server_testing.h): the low-speed limit, the deadline, and reads
// cancelled before or while they run, by a caller or with a session's
// access. These need no moto.
#include "server/objstore/s3_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/objstore/drip_server_testing.h"

namespace stoker {
namespace {

// A store on loopback that drips or fails (drip_server_testing.h): the
// tests below need no moto.
class SlowStoreTest : public ::testing::Test {
 protected:
  void Serve(drip_testing::DripServer::Options d, S3Client::Options o) {
    store_ = std::make_unique<drip_testing::DripServer>(d);
    endpoint_ = *Endpoint::Parse(store_->url());
    o.endpoints = *EndpointAllowList::Parse(store_->url());
    client_ = *S3Client::Create(std::move(o));
  }
  absl::Status Get(const std::string& key, std::string* out) {
    return client_->Get(endpoint_, S3Url{"bkt", key}, 0, 0, "", credentials_, out);
  }

  std::unique_ptr<drip_testing::DripServer> store_;
  Endpoint endpoint_;
  std::unique_ptr<S3Client> client_;
  std::shared_ptr<const S3Credentials> credentials_ =
      std::make_shared<S3Credentials>(S3Credentials{"AKIDEXAMPLE", "secret", "", "us-east-1"});
};

TEST_F(SlowStoreTest, ANormalReadIsWholeWithTheDefaultLimits) {
  drip_testing::DripServer::Options d;
  d.bytes = 100000;
  d.chunk = d.bytes;  // At once.
  Serve(d, {});
  std::string out;
  ASSERT_TRUE(Get("fast", &out).ok());
  EXPECT_EQ(out, drip_testing::DripServer::Body(d.bytes));
}

TEST_F(SlowStoreTest, AStoreThatDripsIsAbandonedAsTooSlow) {
  drip_testing::DripServer::Options d;
  d.interval = absl::Milliseconds(50);  // 20 bytes a second, for 14 hours.
  S3Client::Options o;
  // Neither the attempt's timeout nor the request's deadline can end it:
  // only its speed.
  o.request_timeout = absl::Hours(1);
  o.deadline = absl::Hours(1);
  o.max_attempts = 1;
  o.low_speed_bytes = 1024;
  o.low_speed_time = absl::Seconds(1);
  Serve(d, o);
  std::string out;
  const absl::Status s = Get("slow", &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("s3://bkt/slow"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("too slow"), absl::string_view::npos) << s;
  EXPECT_TRUE(out.empty());
}

TEST_F(SlowStoreTest, TheDeadlineEndsAnAttemptInFlight) {
  drip_testing::DripServer::Options d;
  d.interval = absl::Milliseconds(50);
  S3Client::Options o;
  // Only the request's deadline can end it: each attempt may take an
  // hour, a million of them, and no speed is too slow.
  o.request_timeout = absl::Hours(1);
  o.max_attempts = 1000000;
  o.low_speed_bytes = 0;
  o.deadline = absl::Seconds(1);
  Serve(d, o);
  std::string out;
  const absl::Status s = Get("slow", &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("s3://bkt/slow"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("too slow: not answered within the request's deadline of 1s"),
            absl::string_view::npos)
      << s;
}

TEST_F(SlowStoreTest, TheDeadlineEndsRetries) {
  drip_testing::DripServer::Options d;
  d.status = 503;  // At once, every time.
  S3Client::Options o;
  o.max_attempts = 1000000;
  o.backoff_base = absl::Milliseconds(1);
  o.backoff_cap = absl::Milliseconds(10);
  o.deadline = absl::Seconds(1);
  Serve(d, o);
  std::string out;
  const absl::Status s = Get("failing", &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("s3://bkt/failing"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("HTTP 503"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("the request's deadline of 1s"), absl::string_view::npos) << s;
  EXPECT_GT(store_->requests(), 1);  // It was retried until then.
}

// A read in flight whose cancellation is raised ends CANCELLED, and its
// transfer with it: the store sees the client hang up. Nothing else could
// end it (an hour per attempt, no low speed), so the return is the proof.
TEST_F(SlowStoreTest, ACancelledReadEndsAtOnceWithItsTransfer) {
  drip_testing::DripServer::Options d;
  d.interval = absl::Milliseconds(50);
  S3Client::Options o;
  o.request_timeout = absl::Hours(1);
  o.deadline = absl::Hours(2);
  o.low_speed_bytes = 0;
  Serve(d, o);
  auto cancel = std::make_shared<Cancellation>();
  absl::Status s;
  std::string out;
  std::thread reader([&] {
    s = client_->Get(endpoint_, S3Url{"bkt", "slow"}, 0, 0, "", credentials_, &out, nullptr, 1000,
                     nullptr, cancel);
  });
  store_->WaitForRequests(1);  // In flight.
  cancel->Cancel();
  reader.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_NE(s.message().find("s3://bkt/slow"), absl::string_view::npos) << s;
  EXPECT_TRUE(out.empty());
  store_->WaitForHangUps(1);
  EXPECT_EQ(store_->requests(), 1);
  EXPECT_EQ(client_->stats().failures, 1u);
}

// One waiting for its next attempt is dropped, not tried again.
TEST_F(SlowStoreTest, ACancelledReadIsNotRetried) {
  drip_testing::DripServer::Options d;
  d.status = 503;
  S3Client::Options o;
  o.max_attempts = 1000;
  o.backoff_base = absl::Hours(1);  // Backoff: up to an hour (jittered).
  o.backoff_cap = absl::Hours(1);
  o.deadline = absl::Hours(2);
  Serve(d, o);
  auto cancel = std::make_shared<Cancellation>();
  absl::Status s;
  std::string out;
  std::thread reader([&] {
    s = client_->Get(endpoint_, S3Url{"bkt", "failing"}, 0, 0, "", credentials_, &out, nullptr,
                     1000, nullptr, cancel);
  });
  store_->WaitForRequests(1);
  cancel->Cancel();
  reader.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
}

// One cancelled before it starts is never sent.
TEST_F(SlowStoreTest, AReadCancelledBeforeItStartsIsNeverSent) {
  Serve({}, {});
  auto cancel = std::make_shared<Cancellation>();
  cancel->Cancel();
  std::string out;
  const absl::Status s = client_->Get(endpoint_, S3Url{"bkt", "x"}, 0, 0, "", credentials_, &out,
                                      nullptr, 1000, nullptr, cancel);
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_EQ(store_->requests(), 0);
  EXPECT_EQ(client_->stats().requests, 0u);
}

// Through the ObjectStore the sources use, a session's access carries its
// cancellation to every request: a listing, a HEAD and a GET of a closed
// session end CANCELLED and are never sent.
TEST_F(SlowStoreTest, AClosedSessionsAccessEndsEveryKindOfRequest) {
  Serve({}, {});
  ObjectStore& store = *client_;
  ObjectStoreAccess access;
  access.endpoint = endpoint_;
  access.credentials = credentials_;
  access.owner = 1000;
  auto cancel = std::make_shared<Cancellation>();
  access.cancel = cancel;
  cancel->Cancel();
  EXPECT_EQ(store.List(access, "bkt", "p/", "/", "", 0, nullptr).status().code(),
            absl::StatusCode::kCancelled);
  EXPECT_EQ(store.Head(access, S3Url{"bkt", "x"}, "").status().code(),
            absl::StatusCode::kCancelled);
  std::string out;
  EXPECT_EQ(store.Get(access, S3Url{"bkt", "x"}, 0, 0, "", &out, nullptr, nullptr).code(),
            absl::StatusCode::kCancelled);
  EXPECT_EQ(store_->requests(), 0);
  EXPECT_EQ(client_->stats().requests, 0u);
}

TEST(S3ClientOptionsTest, ALowSpeedNeedsAWholeSecondAndTheDeadlineATime) {
  S3Client::Options o;
  o.low_speed_time = absl::Milliseconds(500);
  EXPECT_EQ(S3Client::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.low_speed_bytes = 0;  // No low speed: its time is not used.
  EXPECT_TRUE(S3Client::Create(o).ok());
  o.deadline = absl::ZeroDuration();
  EXPECT_EQ(S3Client::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stoker
