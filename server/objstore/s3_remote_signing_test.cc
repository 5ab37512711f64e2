// Requests whose caller's client signs them (S3Credentials::remote): the
// store takes them as it takes the daemon's own signatures, the daemon
// asks once per request (not per attempt), a client that does not sign
// sends nothing, and a token the store finds expired is signed afresh
// once.
#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "server/objstore/drip_server_testing.h"
#include "server/objstore/moto_testing.h"
#include "server/objstore/s3_client.h"
#include "server/objstore/s3_signing.h"

namespace stoker {
namespace {

// Credentials whose secret the daemon does not hold: `key` stands in for
// the trainer's, used by a counting signer as its client would.
std::shared_ptr<S3Credentials> Remote(const SigningKey& key, std::atomic<int>* asked) {
  auto c = std::make_shared<S3Credentials>();
  c->access_key_id = key.access_key_id;
  c->region = key.region;
  c->remote = [key, asked](const SigningRequest& r) -> absl::StatusOr<Signature> {
    ++*asked;
    return SignV4(r, key);
  };
  return c;
}

TEST(RemoteSigning, AMotoStoreTakesTheClientsSignatures) {
  absl::StatusOr<std::unique_ptr<moto_testing::MotoServer>> m =
      moto_testing::MotoServer::Start();
  if (!m.ok()) GTEST_SKIP() << m.status();
  S3Client::Options o;
  o.endpoints = *EndpointAllowList::Parse((*m)->endpoint().ToString());
  std::unique_ptr<S3Client> client = *S3Client::Create(std::move(o));
  ASSERT_TRUE((*m)->Put(client.get(), "bkt", "", "").ok());
  const std::string value = moto_testing::Content(70000, 5);
  ASSERT_TRUE((*m)->Put(client.get(), "bkt", "train/a b.jpg", value).ok());
  const S3Credentials& own = *(*m)->credentials();
  std::atomic<int> asked{0};
  auto remote = Remote(
      SigningKey{own.access_key_id, own.secret_access_key, own.session_token, own.region},
      &asked);
  std::string got;
  ASSERT_TRUE(client->Get((*m)->endpoint(), S3Url{"bkt", "train/a b.jpg"}, 100, 5000, "",
                          remote, &got).ok());
  EXPECT_EQ(got, value.substr(100, 5000));
  // (No '/' in the prefix: moto's signature check mishandles one in a
  // query value.)
  absl::StatusOr<ListPage> page = client->List((*m)->endpoint(), "bkt", "train", "", "", remote);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(asked.load(), 2);
  // A wrong secret behind the same key id: the store refuses it.
  auto wrong = Remote(SigningKey{own.access_key_id, "not-the-secret", "", own.region}, &asked);
  absl::Status refused =
      client->Get((*m)->endpoint(), S3Url{"bkt", "train/a b.jpg"}, 0, 0, "", wrong, &got);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
}

class RemoteSigningStoreTest : public ::testing::Test {
 protected:
  void Serve(drip_testing::DripServer::Options d) {
    d.bytes = 1000;
    d.chunk = 1000;  // All at once.
    store_ = std::make_unique<drip_testing::DripServer>(d);
    endpoint_ = *Endpoint::Parse(store_->url());
    S3Client::Options o;
    o.endpoints = *EndpointAllowList::Parse(store_->url());
    o.backoff_base = absl::Milliseconds(1);
    client_ = *S3Client::Create(std::move(o));
  }
  std::unique_ptr<drip_testing::DripServer> store_;
  Endpoint endpoint_;
  std::unique_ptr<S3Client> client_;
};

TEST_F(RemoteSigningStoreTest, RetriesReuseTheSignatureAndASilentClientSendsNothing) {
  drip_testing::DripServer::Options d;
  d.status = 503;
  d.errors = 2;  // Two throttles, then the object.
  Serve(d);
  std::atomic<int> asked{0};
  auto remote = Remote(SigningKey{"AKIDEXAMPLE", "s", "tok", "us-east-1"}, &asked);
  std::string got;
  ASSERT_TRUE(client_->Get(endpoint_, S3Url{"bkt", "k"}, 0, 0, "", remote, &got).ok());
  EXPECT_EQ(store_->requests(), 3);
  EXPECT_EQ(asked.load(), 1);  // One signature, three attempts.
  for (const std::string& head : store_->heads()) {
    EXPECT_TRUE(absl::StrContains(head, "x-amz-security-token: tok")) << head;
    EXPECT_TRUE(absl::StrContains(head, "Credential=AKIDEXAMPLE/")) << head;
  }
  auto silent = std::make_shared<S3Credentials>(*remote);
  silent->remote = [](const SigningRequest&) -> absl::StatusOr<Signature> {
    return absl::UnavailableError("the client's file opener is gone");
  };
  absl::Status s = client_->Get(endpoint_, S3Url{"bkt", "k"}, 0, 0, "", silent, &got);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "did not sign")) << s;
  EXPECT_EQ(store_->requests(), 3);  // Nothing sent.
}

TEST_F(RemoteSigningStoreTest, AnExpiredTokenIsSignedAfreshOnce) {
  drip_testing::DripServer::Options d;
  d.status = 400;
  d.errors = 1;
  d.error_body = "<Error><Code>ExpiredToken</Code></Error>";
  Serve(d);
  std::atomic<int> asked{0};
  auto remote = Remote(SigningKey{"AKIDEXAMPLE", "s", "tok", "us-east-1"}, &asked);
  std::string got;
  absl::Status s = client_->Get(endpoint_, S3Url{"bkt", "k"}, 0, 0, "", remote, &got);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(asked.load(), 2);
  EXPECT_EQ(store_->requests(), 2);
  // Always expired: once more, then the store's answer.
  d.errors = -1;
  Serve(d);
  s = client_->Get(endpoint_, S3Url{"bkt", "k"}, 0, 0, "", remote, &got);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "ExpiredToken")) << s;
  EXPECT_EQ(store_->requests(), 2);
}

TEST_F(RemoteSigningStoreTest, AHeadRefusedWithNoWordsIsSignedAfreshOnce) {
  drip_testing::DripServer::Options d;
  d.status = 403;
  d.errors = 1;  // A HEAD's refusal has no body: perhaps an expired token.
  Serve(d);
  std::atomic<int> asked{0};
  auto remote = Remote(SigningKey{"AKIDEXAMPLE", "s", "tok", "us-east-1"}, &asked);
  absl::StatusOr<ObjectVersion> v = client_->Head(endpoint_, S3Url{"bkt", "k"}, remote);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(asked.load(), 2);
  EXPECT_EQ(store_->requests(), 2);
}

// A proof for what is kept under a key id must be signed by that key id:
// a client that names one and signs with another is ABORTED before
// anything is sent.
TEST_F(RemoteSigningStoreTest, AProofSignedAsAnotherKeyIdIsNone) {
  Serve({});
  std::atomic<int> asked{0};
  auto named = Remote(SigningKey{"AKIDOTHER", "s", "", "us-east-1"}, &asked);
  named->access_key_id = "AKIDNAMED";
  absl::StatusOr<ListPage> page = client_->List(endpoint_, "bkt", "p/", "/", "", named, 1);
  EXPECT_TRUE(page.ok() || page.status().code() != absl::StatusCode::kAborted);
  named->signed_as_named = true;
  page = client_->List(endpoint_, "bkt", "p/", "/", "", named, 1);
  EXPECT_EQ(page.status().code(), absl::StatusCode::kAborted) << page.status();
  EXPECT_EQ(store_->requests(), 1);  // The first only.
  named->access_key_id = "AKIDOTHER";
  std::string got;
  EXPECT_TRUE(client_->Get(endpoint_, S3Url{"bkt", "k"}, 0, 0, "", named, &got).ok());
}

}  // namespace
}  // namespace stoker
