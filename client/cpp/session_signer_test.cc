// The client signs its session's dataset and nothing else: what a daemon,
// real or not, may have signed, and the signature it gets.
#include "client/cpp/session_signer.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "server/objstore/s3_address.h"

namespace stoker {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'796'000'000);

class SessionSignerTest : public ::testing::Test {
 protected:
  std::unique_ptr<SessionSigner> Make(const std::string& url, const std::string& manifest = "") {
    v1::S3Source source;
    source.set_url(url);
    source.set_manifest(manifest);
    auto s = SessionSigner::Create(
        source, "http://127.0.0.1:9000", "eu-west-1",
        [this]() -> absl::StatusOr<SigningKey> {
          ++asked_;
          return SigningKey{"AKIAEXAMPLE", "the-secret", token_, ""};
        },
        [] { return kNow; });
    EXPECT_TRUE(s.ok()) << s.status();
    return *std::move(s);
  }
  static std::string Request(const std::string& method, const std::string& bucket,
                             const std::string& key,
                             std::vector<std::pair<std::string, std::string>> query = {},
                             absl::Time at = kNow, const std::string& host = "127.0.0.1:9000") {
    return SigningRequest{method, host, ObjectPath(bucket, key), CanonicalQuery(query),
                          AmzDate(at)}
        .Encode();
  }
  int asked_ = 0;
  std::string token_ = "tok";
};

TEST_F(SessionSignerTest, SignsTheDatasetsObjectsAndListings) {
  auto s = Make("s3://photos/train/");
  absl::StatusOr<std::string> got = s->Sign(Request("GET", "photos", "train/cat/1.jpg"));
  ASSERT_TRUE(got.ok()) << got.status();
  absl::StatusOr<Signature> sig = Signature::Parse(*got);
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_TRUE(absl::StrContains(sig->authorization, "Credential=AKIAEXAMPLE/"));
  EXPECT_TRUE(absl::StrContains(sig->authorization, "/eu-west-1/s3/aws4_request"));
  EXPECT_EQ(sig->session_token, "tok");
  // Exactly what the daemon's own signer makes with the same key.
  absl::StatusOr<SigningRequest> r = SigningRequest::Parse(Request("GET", "photos", "train/cat/1.jpg"));
  EXPECT_EQ(sig->authorization,
            SignV4(*r, SigningKey{"AKIAEXAMPLE", "the-secret", "tok", "eu-west-1"}).authorization);
  EXPECT_TRUE(s->Sign(Request("HEAD", "photos", "train/a b+c/é.png")).ok());
  EXPECT_TRUE(s->Sign(Request("GET", "photos", "",
                              {{"list-type", "2"}, {"prefix", "train/"}, {"delimiter", "/"},
                               {"continuation-token", "a/b=="}, {"max-keys", "1000"}}))
                  .ok());
  EXPECT_TRUE(
      s->Sign(Request("GET", "photos", "", {{"list-type", "2"}, {"prefix", "train/cat/"}})).ok());
  EXPECT_EQ(asked_, 4);  // Credentials at each signature: the source refreshes.
}

TEST_F(SessionSignerTest, RefusesEverythingElse) {
  auto s = Make("s3://photos/train/");
  const std::vector<std::string> refused = {
      Request("PUT", "photos", "train/x.jpg"),
      Request("GET", "photos", "val/x.jpg"),                        // Another prefix.
      Request("GET", "photos", "trainer/x.jpg"),                    // A longer name.
      Request("GET", "other", "train/x.jpg"),                       // Another bucket.
      Request("GET", "photos", "train/../secret/x"),                // A dot segment.
      Request("GET", "photos", "train/./x"),
      Request("GET", "photos", "train/x.jpg", {{"acl", ""}}),       // A query on an object.
      Request("GET", "photos", "train/x.jpg", {}, kNow, "s3.evil.example"),
      Request("GET", "photos", "train/x.jpg", {}, kNow + absl::Minutes(6)),  // For later.
      Request("GET", "photos", "train/x.jpg", {}, kNow - absl::Hours(1)),
      Request("GET", "photos", "", {{"list-type", "2"}, {"prefix", "val/"}}),
      Request("GET", "photos", "", {{"list-type", "2"}, {"prefix", ""}}),
      Request("GET", "photos", "", {{"list-type", "1"}, {"prefix", "train/"}}),
      Request("GET", "photos", "", {{"prefix", "train/"}}),
      Request("GET", "photos", "",
              {{"list-type", "2"}, {"prefix", "train/"}, {"versions", ""}}),
      Request("GET", "photos", "", {{"list-type", "2"}, {"prefix", "train/../"}}),
      // A parameter twice: a store may read the first.
      "GET\n127.0.0.1:9000\n/photos\nlist-type=2&prefix=&prefix=train%2F\n" + AmzDate(kNow),
      "GET\n127.0.0.1:9000\n/photos\nlist-type=2&prefix=secret%2F&prefix=train%2F\n" +
          AmzDate(kNow),
      "GET\n127.0.0.1:9000\n/photos\nlist-type=2&list-type=1&prefix=train%2F\n" + AmzDate(kNow),
      // Out of canonical order, or an escape that is no hex pair.
      "GET\n127.0.0.1:9000\n/photos\nprefix=train%2F&list-type=2\n" + AmzDate(kNow),
      "GET\n127.0.0.1:9000\n/photos/train/%-1\n\n" + AmzDate(kNow),
      "GET\n127.0.0.1:9000\n/photos/train/x\n\n20261206T101010Z\r\nX-Evil: 1",
  };
  for (const std::string& r : refused) {
    absl::StatusOr<std::string> got = s->Sign(r);
    EXPECT_FALSE(got.ok()) << r;
  }
  absl::StatusOr<std::string> got = s->Sign(Request("GET", "photos", "val/x.jpg"));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(got.status().message(), "/photos/val/x.jpg")) << got.status();
  EXPECT_TRUE(absl::StrContains(got.status().message(), "s3://photos/train/*"));
  EXPECT_EQ(asked_, 0);  // No credential was touched for any of them.
}

TEST_F(SessionSignerTest, ObjectsPatternsAndManifests) {
  auto one = Make("s3://shards/data/train-0001.tar");
  EXPECT_TRUE(one->Sign(Request("HEAD", "shards", "data/train-0001.tar")).ok());
  EXPECT_FALSE(one->Sign(Request("HEAD", "shards", "data/train-0001.tar.bak")).ok());
  EXPECT_FALSE(one->Sign(Request("HEAD", "shards", "data/train-0002.tar")).ok());
  auto pattern = Make("s3://shards/data/train-{0000..0099}.tar", "s3://lists/train.tsv");
  EXPECT_TRUE(pattern->Sign(Request("GET", "shards", "data/train-0042.tar")).ok());
  EXPECT_TRUE(
      pattern->Sign(Request("GET", "shards", "", {{"list-type", "2"}, {"prefix", "data/"}})).ok());
  EXPECT_FALSE(pattern->Sign(Request("GET", "shards", "other/x.tar")).ok());
  EXPECT_TRUE(pattern->Sign(Request("GET", "lists", "train.tsv")).ok());
  EXPECT_FALSE(pattern->Sign(Request("GET", "lists", "val.tsv")).ok());
  EXPECT_FALSE(
      pattern->Sign(Request("GET", "lists", "", {{"list-type", "2"}, {"prefix", "train.tsv"}}))
          .ok());
}

TEST_F(SessionSignerTest, ACredentialErrorIsTheSigners) {
  v1::S3Source source;
  source.set_url("s3://photos/train/");
  auto s = SessionSigner::Create(
      source, "http://127.0.0.1:9000", "us-east-1",
      []() -> absl::StatusOr<SigningKey> {
        return absl::UnauthenticatedError("credential_process `x` exited 1");
      },
      [] { return kNow; });
  ASSERT_TRUE(s.ok());
  absl::StatusOr<std::string> got = (*s)->Sign(Request("GET", "photos", "train/x.jpg"));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnauthenticated);
  // The source's words stay here: the daemon gets only that it failed.
  EXPECT_FALSE(absl::StrContains(got.status().message(), "exited 1"));
  EXPECT_TRUE(absl::StrContains(got.status().message(), "trainer's stderr"));
}

}  // namespace
}  // namespace stoker
