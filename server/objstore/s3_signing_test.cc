#include "server/objstore/s3_signing.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

// AWS's published Signature Version 4 examples for S3 ("Examples: Signature
// Calculations in AWS Signature Version 4").
SigningKey Example() {
  return SigningKey{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "",
                    "us-east-1"};
}

TEST(S3Signing, AwsGetObjectExample) {
  const char* canonical =
      "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
      "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
      "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
  EXPECT_EQ(SignatureOf(canonical, "20130524T000000Z", Example()),
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(S3Signing, AwsListObjectsExample) {
  SigningRequest r{"GET", "examplebucket.s3.amazonaws.com", "/", "max-keys=2&prefix=J",
                   "20130524T000000Z"};
  EXPECT_EQ(SignV4(r, Example()).authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
            "aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
            "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST(S3Signing, AwsLifecycleExample) {
  SigningRequest r{"GET", "examplebucket.s3.amazonaws.com", "/", "lifecycle=",
                   "20130524T000000Z"};
  const Signature s = SignV4(r, Example());
  EXPECT_TRUE(absl::EndsWith(
      s.authorization,
      "Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"));
  EXPECT_EQ(s.session_token, "");
}

TEST(S3Signing, ATokenIsSignedAndCarried) {
  SigningKey k = Example();
  k.session_token = "FwoGZXIvYXdzEBc+/=";
  SigningRequest r{"HEAD", "127.0.0.1:9000", "/b/k", "", "20261206T101010Z"};
  const Signature with = SignV4(r, k);
  EXPECT_NE(with.authorization.find(
                "SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token"),
            std::string::npos);
  EXPECT_EQ(with.session_token, k.session_token);
  k.session_token = "other";
  EXPECT_NE(SignV4(r, k).authorization, with.authorization);
  // Round trip through the wire form, hostile input refused.
  absl::StatusOr<Signature> back = Signature::Parse(with.Encode());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->authorization, with.authorization);
  EXPECT_EQ(back->session_token, with.session_token);
  EXPECT_FALSE(Signature::Parse(with.authorization + "\r\nX-Evil: 1\ntoken").ok());
  EXPECT_FALSE(Signature::Parse(with.authorization + "\ntok\r\nen").ok());
  EXPECT_FALSE(Signature::Parse(with.authorization).ok());
  EXPECT_FALSE(Signature::Parse("Basic abc\n").ok());
  EXPECT_FALSE(Signature::Parse(with.authorization + "\n" + std::string(4097, 'a')).ok());
}

TEST(S3Signing, RequestsRoundTripAndHostileOnesAreRefused) {
  SigningRequest r{"GET", "[::1]:9000", "/bucket/a%20b/c.jpg", "list-type=2&prefix=a%2F",
                   "20261206T101010Z"};
  absl::StatusOr<SigningRequest> back = SigningRequest::Parse(r.Encode());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->Encode(), r.Encode());
  for (const std::string& bad : {
           std::string("DELETE\nh\n/b/k\n\n20261206T101010Z"),
           std::string("GET\nh\nb/k\n\n20261206T101010Z"),
           std::string("GET\nh\n/b/k k\n\n20261206T101010Z"),
           std::string("GET\nh\n/b/k\nx=1\r\n\n20261206T101010Z"),
           std::string("GET\nEvil.Host\n/b/k\n\n20261206T101010Z"),
           std::string("GET\nh\n/b/k\n\n2026-12-06T10:10:10Z"),
           std::string("GET\nh\n/b/k\n\n20261206T101010Z\nextra"),
       }) {
    EXPECT_FALSE(SigningRequest::Parse(bad).ok()) << bad;
  }
}

TEST(S3Signing, HostHeaderAndDate) {
  EXPECT_EQ(HostHeader(*Endpoint::Parse("https://s3.us-east-1.amazonaws.com")),
            "s3.us-east-1.amazonaws.com");
  EXPECT_EQ(HostHeader(*Endpoint::Parse("http://127.0.0.1:9000")), "127.0.0.1:9000");
  EXPECT_EQ(HostHeader(*Endpoint::Parse("http://[::1]:80")), "[::1]");
  EXPECT_EQ(AmzDate(absl::FromUnixSeconds(1369353600)), "20130524T000000Z");
  EXPECT_EQ(std::string(PayloadHash("PUT")), "UNSIGNED-PAYLOAD");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace stoker
