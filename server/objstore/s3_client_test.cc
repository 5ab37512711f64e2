#include "server/objstore/s3_client.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "server/objstore/fault_proxy.h"
#include "server/objstore/moto_testing.h"

namespace stoker {
namespace {

using moto_testing::MotoServer;

using moto_testing::Content;

class S3ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<MotoServer>> m = MotoServer::Start();
    if (!m.ok()) GTEST_SKIP() << m.status();
    moto_ = *std::move(m);
    client_ = Client(moto_->endpoint());
    const absl::Status bucket = Put("", "");
    ASSERT_TRUE(bucket.ok()) << bucket;  // The bucket.
    objects_ = {{"train/cat/a b.jpg", Content(100000, 1)},
                {"train/cat/c_d-e~f.jpg", Content(3000, 2)},
                {"train/dog/x/../y.jpg", Content(1, 3)},
                {"train/dog/empty", ""}};
    for (const auto& [key, value] : objects_) ASSERT_TRUE(Put(key, value).ok()) << key;
  }

  std::unique_ptr<S3Client> Client(const Endpoint& allowed, S3Client::Options o = {}) {
    o.endpoints = *EndpointAllowList::Parse(allowed.ToString());
    return *S3Client::Create(std::move(o));
  }

  absl::Status Put(const std::string& key, std::string value) {
    return moto_->Put(client_.get(), "bkt", key, std::move(value));
  }

  S3Url Object(const std::string& key) { return S3Url{"bkt", key}; }

  // A client that reaches moto only through a fault proxy.
  struct Faulty {
    std::unique_ptr<FaultProxy> proxy;
    Endpoint via;
    std::unique_ptr<S3Client> client;
    S3Request Read(const std::string& key, std::shared_ptr<const S3Credentials> c) const {
      S3Request r;
      r.endpoint = via;
      r.bucket = "bkt";
      r.key = key;
      r.credentials = std::move(c);
      return r;
    }
  };
  Faulty Through(FaultProxy::Options po, S3Client::Options o) {
    po.upstream_port = moto_->port();
    Faulty f;
    f.proxy = *FaultProxy::Start(po);
    f.via = *Endpoint::Parse(f.proxy->url());
    f.client = Client(f.via, std::move(o));
    return f;
  }

  std::unique_ptr<MotoServer> moto_;
  std::unique_ptr<S3Client> client_;
  std::map<std::string, std::string> objects_;
};

TEST_F(S3ClientTest, SignedReadsAreByteExact) {
  for (const auto& [key, value] : objects_) {
    absl::StatusOr<ObjectVersion> head =
        client_->Head(moto_->endpoint(), Object(key), moto_->credentials());
    ASSERT_TRUE(head.ok()) << head.status();
    EXPECT_EQ(head->size, value.size()) << key;
    EXPECT_FALSE(head->etag.empty());
    std::string got;
    ObjectVersion seen;
    ASSERT_TRUE(client_->Get(moto_->endpoint(), Object(key), 0, 0, "", moto_->credentials(),
                             &got, &seen).ok()) << key;
    EXPECT_EQ(got, value) << key;
    EXPECT_EQ(seen.etag, head->etag);
  }
  // Ranges, at the object's version.
  const std::string& big = objects_["train/cat/a b.jpg"];
  const std::string etag =
      client_->Head(moto_->endpoint(), Object("train/cat/a b.jpg"), moto_->credentials())->etag;
  for (auto [offset, length] : std::vector<std::pair<uint64_t, uint64_t>>{
           {0, 1}, {1, 4096}, {99999, 1}, {50000, 50000}, {65536, 100000}}) {
    std::string got;
    ObjectVersion seen;
    ASSERT_TRUE(client_->Get(moto_->endpoint(), Object("train/cat/a b.jpg"), offset, length,
                             etag, moto_->credentials(), &got, &seen).ok())
        << offset << "+" << length;
    EXPECT_EQ(got, big.substr(offset, length)) << offset << "+" << length;
    EXPECT_EQ(seen.size, big.size());
  }
}

TEST_F(S3ClientTest, ErrorsSayWhatAndNeverTheSecret) {
  std::string got;
  // A wrong secret: PERMISSION_DENIED naming the bucket, no secret shown.
  auto wrong = std::make_shared<S3Credentials>(*moto_->credentials());
  wrong->secret_access_key = "not-the-secret-0123456789";
  absl::Status s = client_->Get(moto_->endpoint(), Object("train/cat/a b.jpg"), 0, 0, "", wrong,
                                &got);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_NE(s.message().find("bkt"), std::string::npos) << s;
  EXPECT_NE(s.message().find("SignatureDoesNotMatch"), std::string::npos) << s;
  EXPECT_EQ(s.message().find("not-the-secret"), std::string::npos) << s;
  // A token the store does not know (S3 answers 400 InvalidToken): still
  // PERMISSION_DENIED, the token (part of S3's canonical request) unshown.
  auto token = std::make_shared<S3Credentials>(*moto_->credentials());
  token->session_token = "FQoGZXIvYXdzEtokenpart0123456789";
  s = client_->Get(moto_->endpoint(), Object("train/cat/a b.jpg"), 0, 0, "", token, &got);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_EQ(s.message().find("tokenpart"), std::string::npos) << s;
  EXPECT_EQ(s.message().find(moto_->credentials()->secret_access_key), std::string::npos);
  // No credentials at all: refused before any request.
  const uint64_t sent = client_->stats().requests;
  s = client_->Get(moto_->endpoint(), Object("x"), 0, 0, "", nullptr, &got);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_NE(s.message().find("AWS_ACCESS_KEY_ID"), std::string::npos) << s;
  EXPECT_EQ(client_->stats().requests, sent);
  // Missing object, range past the end, a changed version.
  s = client_->Get(moto_->endpoint(), Object("train/none.jpg"), 0, 0, "", moto_->credentials(),
                   &got);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("s3://bkt/train/none.jpg"), std::string::npos) << s;
  s = client_->Get(moto_->endpoint(), Object("train/cat/a b.jpg"), 200000, 10, "",
                   moto_->credentials(), &got);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  s = client_->Get(moto_->endpoint(), Object("train/cat/a b.jpg"), 0, 10,
                   "0123456789abcdef0123456789abcdef", moto_->credentials(), &got);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  // A reply over its cap is refused before it is stored.
  S3Client::Options small;
  small.max_reply_bytes = 1000;
  auto capped = Client(moto_->endpoint(), small);
  s = capped->Get(moto_->endpoint(), Object("train/cat/a b.jpg"), 0, 0, "",
                  moto_->credentials(), &got);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
}

TEST_F(S3ClientTest, NothingACallerGivesReachesAHeaderLineUnchecked) {
  // A CR or LF would add headers, or a request, to a shared connection.
  const uint64_t sent = client_->stats().requests;
  auto fields = {&S3Credentials::access_key_id, &S3Credentials::secret_access_key,
                 &S3Credentials::session_token, &S3Credentials::region};
  for (auto field : fields) {
    auto c = std::make_shared<S3Credentials>(*moto_->credentials());
    (*c).*field = "ok\r\nX-Injected: 1";
    std::string got;
    absl::Status s = client_->Get(moto_->endpoint(), Object("train/cat/a b.jpg"), 0, 0, "", c,
                                  &got);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(s.message().find("Injected"), std::string::npos) << s;
  }
  std::string got;
  EXPECT_EQ(client_->Get(moto_->endpoint(), Object("train/cat/a b.jpg"), 0, 10, "x\"\r\nA: b",
                         moto_->credentials(), &got).code(),
            absl::StatusCode::kInvalidArgument);
  // A range whose end wraps.
  EXPECT_EQ(client_->Get(moto_->endpoint(), Object("train/cat/a b.jpg"), UINT64_MAX - 5, 10, "",
                         moto_->credentials(), &got).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->stats().requests, sent);
}

TEST_F(S3ClientTest, OnlyAllowedEndpointsAreReached) {
  // The same server under a name the operator did not list.
  Endpoint other = moto_->endpoint();
  other.host = "localhost";
  std::string got;
  absl::Status s = client_->Get(other, Object("train/cat/a b.jpg"), 0, 0, "",
                                moto_->credentials(), &got);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_NE(s.message().find("--object-store-endpoints"), std::string::npos) << s;
  Endpoint metadata;
  metadata.tls = false;
  metadata.host = "169.254.169.254";
  metadata.port = 80;
  const uint64_t sent = client_->stats().requests;
  EXPECT_EQ(client_->Head(metadata, Object("latest"), moto_->credentials()).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(client_->stats().requests, sent);
}

// A daemon of one user (--object-store-own-endpoints): an admin's request
// (owner -1) reaches the endpoint its client resolved, unlisted; another
// user's is refused before anything is sent.
TEST_F(S3ClientTest, AdminsReachTheirOwnEndpointsWhereAllowed) {
  S3Client::Options o;
  o.endpoints.AllowAdmins();
  absl::StatusOr<std::unique_ptr<S3Client>> own = S3Client::Create(std::move(o));
  ASSERT_TRUE(own.ok()) << own.status();
  std::string got;
  absl::Status s = (*own)->Get(moto_->endpoint(), Object("train/cat/c_d-e~f.jpg"), 0, 0, "",
                               moto_->credentials(), &got, nullptr, /*owner=*/-1);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(got, objects_["train/cat/c_d-e~f.jpg"]);
  const uint64_t sent = (*own)->stats().requests;
  s = (*own)->Get(moto_->endpoint(), Object("train/cat/c_d-e~f.jpg"), 0, 0, "",
                  moto_->credentials(), &got, nullptr, /*owner=*/1000);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_EQ((*own)->stats().requests, sent);
}

TEST_F(S3ClientTest, ThrottlesAndResetsAreRetriedWithinTheBudget) {
  const std::string key = "train/cat/c_d-e~f.jpg";
  FaultProxy::Options po;
  po.fail_first = 2;
  S3Client::Options o;
  o.backoff_base = absl::Milliseconds(1);
  Faulty f = Through(po, o);
  S3Reply reply = f.client->Run(f.Read(key, moto_->credentials()));
  ASSERT_TRUE(reply.status.ok()) << reply.status;
  EXPECT_EQ(reply.body, objects_[key]);
  EXPECT_EQ(reply.attempts, 3);
  EXPECT_EQ(f.client->stats().retries, 2u);
  EXPECT_EQ(f.client->stats().throttles, 2u);
  EXPECT_EQ(f.proxy->counts().slow_downs, 2u);
  // Past the budget: UNAVAILABLE saying how many tries.
  po.fail_first = 100;
  o.max_attempts = 3;
  Faulty failing = Through(po, o);
  reply = failing.client->Run(failing.Read(key, moto_->credentials()));
  EXPECT_EQ(reply.status.code(), absl::StatusCode::kUnavailable) << reply.status;
  EXPECT_NE(reply.status.message().find("SlowDown"), std::string::npos) << reply.status;
  EXPECT_NE(reply.status.message().find("3 attempts"), std::string::npos) << reply.status;
  EXPECT_EQ(failing.proxy->counts().requests, 3u);
  // Every connection reset: UNAVAILABLE too.
  po.fail_first = 0;
  po.reset_share = 1;
  Faulty resetting = Through(po, o);
  reply = resetting.client->Run(resetting.Read(key, moto_->credentials()));
  EXPECT_EQ(reply.status.code(), absl::StatusCode::kUnavailable) << reply.status;
  EXPECT_EQ(reply.attempts, 3);
}

TEST_F(S3ClientTest, OneIdentitysThrottlesCutOnlyItsOwnLimit) {
  const std::string key = "train/cat/c_d-e~f.jpg";
  FaultProxy::Options po;
  po.fail_first = 4;  // 503 SlowDown, all to the first identity's read.
  S3Client::Options o;
  o.backoff_base = absl::Milliseconds(1);
  o.min_in_flight = 1;
  o.initial_in_flight = 8;
  o.max_in_flight = 32;
  Faulty f = Through(po, o);
  S3Reply reply = f.client->Run(f.Read(key, moto_->credentials()));
  ASSERT_TRUE(reply.status.ok()) << reply.status;
  EXPECT_EQ(f.client->stats().throttles, 4u);
  const int throttled = f.client->stats().in_flight_limit;
  EXPECT_LT(throttled, 8);
  // Another identity at the same endpoint starts from its own limit, not
  // the one the first one's throttles cut (the store refuses its key:
  // no throttle, no answer that moves a limit).
  auto other = std::make_shared<S3Credentials>(*moto_->credentials());
  other->access_key_id = "AKIAANOTHERUSER";
  reply = f.client->Run(f.Read(key, other));
  EXPECT_FALSE(reply.status.ok());
  EXPECT_EQ(f.client->stats().throttles, 4u);
  EXPECT_EQ(f.client->stats().in_flight_limit, throttled + 8);
}

TEST_F(S3ClientTest, ManyInFlightThroughFaults) {
  FaultProxy::Options po;
  po.latency = absl::Milliseconds(20);
  po.slow_down_share = 0.05;
  po.reset_share = 0.05;
  po.seed = 7;
  S3Client::Options o;
  o.backoff_base = absl::Milliseconds(1);
  o.max_attempts = 8;
  Faulty f = Through(po, o);
  S3Client* client = f.client.get();
  const std::string& big = objects_["train/cat/a b.jpg"];
  constexpr int kReads = 200;
  absl::BlockingCounter left(kReads);
  std::atomic<int> exact{0};
  for (int i = 0; i < kReads; ++i) {
    S3Request r = f.Read("train/cat/a b.jpg", moto_->credentials());
    r.offset = static_cast<uint64_t>(i) * 400;
    r.length = 1000;
    client->Start(r, [&, i](S3Reply reply) {
      if (reply.status.ok() && reply.body == big.substr(i * 400, 1000)) ++exact;
      left.DecrementCount();
    });
  }
  left.Wait();
  EXPECT_EQ(exact.load(), kReads);
  const S3Client::Stats st = client->stats();
  EXPECT_EQ(st.failures, 0u);
  EXPECT_GE(st.retries, 1u);
  EXPECT_EQ(st.requests, kReads + st.retries);
  EXPECT_GE(st.in_flight_limit, o.min_in_flight);
  EXPECT_LE(st.in_flight_limit, o.max_in_flight);
}

TEST_F(S3ClientTest, TheLimitGrowsPastWhereItStartsWhileRequestsWait) {
  FaultProxy::Options po;
  po.latency = absl::Milliseconds(20);
  S3Client::Options o;
  o.initial_in_flight = 4;
  Faulty f = Through(po, o);
  // 200 reads at once, each 20 ms away: from 4, one more per answer while
  // the store's queue stays short (in_flight_limit_test has the rules).
  constexpr int kReads = 200;
  absl::BlockingCounter left(kReads);
  std::atomic<int> ok{0};
  for (int i = 0; i < kReads; ++i) {
    f.client->Start(f.Read("train/cat/a b.jpg", moto_->credentials()), [&](S3Reply reply) {
      if (reply.status.ok()) ++ok;
      left.DecrementCount();
    });
  }
  left.Wait();
  EXPECT_EQ(ok.load(), kReads);
  const S3Client::Stats st = f.client->stats();
  EXPECT_EQ(st.throttles, 0u);
  EXPECT_GT(st.in_flight_limit, 4);
}

TEST_F(S3ClientTest, OwnersTakeTurns) {
  FaultProxy::Options po;
  po.latency = absl::Milliseconds(20);
  S3Client::Options o;
  o.min_in_flight = 1;
  o.initial_in_flight = 2;
  o.max_in_flight = 2;
  Faulty f = Through(po, o);
  // One user queues 40 reads, then another 4: the second's are started in
  // turn with the first's, not after them.
  absl::Mutex mu;
  std::vector<int64_t> order;
  constexpr int kMany = 40, kFew = 4;
  absl::BlockingCounter left(kMany + kFew);
  for (int i = 0; i < kMany + kFew; ++i) {
    S3Request r = f.Read("train/cat/a b.jpg", moto_->credentials());
    r.owner = i < kMany ? 1000 : 1001;
    f.client->Start(r, [&, owner = r.owner](S3Reply reply) {
      EXPECT_TRUE(reply.status.ok()) << reply.status;
      absl::MutexLock lock(&mu);
      order.push_back(owner);
      left.DecrementCount();
    });
  }
  left.Wait();
  absl::MutexLock lock(&mu);
  ASSERT_EQ(order.size(), size_t{kMany + kFew});
  // The few were all done within the first 16 answers (first come first
  // served: the last 4).
  EXPECT_EQ(std::count(order.begin(), order.begin() + 16, 1001), kFew);
}

TEST_F(S3ClientTest, ATimeoutIsDeadlineExceeded) {
  FaultProxy::Options po;
  po.latency = absl::Seconds(1);  // Far past the request's deadline.
  S3Client::Options o;
  o.request_timeout = absl::Milliseconds(100);
  o.max_attempts = 1;
  Faulty f = Through(po, o);
  absl::StatusOr<ObjectVersion> head =
      f.client->Head(f.via, Object("train/cat/a b.jpg"), moto_->credentials());
  EXPECT_EQ(head.status().code(), absl::StatusCode::kDeadlineExceeded) << head.status();
}

TEST_F(S3ClientTest, AStoppedReaderDoesNotWaitForItsGet) {
  FaultProxy::Options po;
  po.latency = absl::Seconds(3);  // Past the stop (the proxy waits it out when it goes).
  Faulty f = Through(po, {});
  std::atomic<bool> stop{false};
  std::string out;
  std::thread stopper([&] {  // Once the request is at the proxy.
    while (f.proxy->counts().requests == 0) std::this_thread::yield();
    stop.store(true);
  });
  absl::Status s = f.client->Get(f.via, Object("train/cat/a b.jpg"), 0, 0, "",
                                 moto_->credentials(), &out, nullptr, -1,
                                 [&] { return stop.load(); });
  stopper.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_TRUE(out.empty());
  // The client is destroyed with the request in flight: it is cancelled.
  f.client.reset();
}

// Listings with a delimiter run with signature checks off (moto's checker
// rejects an encoded '/' in a signed query value; see moto_testing.h).
TEST(S3ListTest, ListsPrefixesAndPages) {
  absl::StatusOr<std::unique_ptr<MotoServer>> m = MotoServer::Start(false);
  if (!m.ok()) GTEST_SKIP() << m.status();
  S3Client::Options o;
  o.endpoints = *EndpointAllowList::Parse((*m)->endpoint().ToString());
  auto client = *S3Client::Create(o);
  auto put = [&](const std::string& key) { return (*m)->Put(client.get(), "bkt", key, key); };
  ASSERT_TRUE(put("").ok());
  std::vector<std::string> keys;
  for (const char* cls : {"cat", "dog", "eel"}) {
    for (int i = 0; i < 7; ++i) keys.push_back(absl::StrCat("train/", cls, "/", i, ".jpg"));
  }
  keys.push_back("train/readme.txt");
  // Keys moto's checker gets wrong (moto_testing.h): encoded bytes.
  keys.push_back("train/c+d,e=f&g.jpg");
  keys.push_back("train/caf\xc3\xa9 \xe7\x8c\xab.jpg");
  for (const std::string& k : keys) ASSERT_TRUE(put(k).ok()) << k;
  absl::StatusOr<ListPage> top =
      client->List((*m)->endpoint(), "bkt", "train/", "/", "", (*m)->credentials());
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_EQ(top->prefixes, (std::vector<std::string>{"train/cat/", "train/dog/", "train/eel/"}));
  ASSERT_EQ(top->objects.size(), 3u);
  EXPECT_EQ(top->objects[2].key, "train/readme.txt");
  EXPECT_EQ(top->objects[2].size, std::string("train/readme.txt").size());
  // All 24 keys, 5 a page.
  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    absl::StatusOr<ListPage> p =
        client->List((*m)->endpoint(), "bkt", "train/", "", token, (*m)->credentials(), 5);
    ASSERT_TRUE(p.ok()) << p.status();
    for (const ListedObject& o : p->objects) seen.push_back(o.key);
    token = p->truncated ? p->next_token : "";
    ++pages;
  } while (!token.empty() && pages < 100);
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(seen, keys);
  EXPECT_EQ(pages, 5);
  for (const std::string& k : keys) {
    std::string got;
    ASSERT_TRUE(client->Get((*m)->endpoint(), S3Url{"bkt", k}, 0, 0, "", (*m)->credentials(),
                            &got).ok()) << k;
    EXPECT_EQ(got, k);
  }
}

}  // namespace
}  // namespace stoker
