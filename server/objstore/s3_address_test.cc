#include "server/objstore/s3_address.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

TEST(EndpointTest, ParsesSchemeHostAndPort) {
  absl::StatusOr<Endpoint> e = Endpoint::Parse("https://S3.us-east-1.AmazonAWS.com");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->ToString(), "https://s3.us-east-1.amazonaws.com:443");
  e = Endpoint::Parse("http://127.0.0.1:9000/");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_FALSE(e->tls);
  EXPECT_EQ(e->port, 9000);
  e = Endpoint::Parse("http://[::1]:9000");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->host, "::1");
  EXPECT_EQ(e->ToString(), "http://[::1]:9000");
  for (const char* bad : {"ftp://x", "s3://bucket", "http://user@host", "http://h/path",
                          "http://h:0", "http://h:70000", "http://h:x", "http://", "http://[::1",
                          "http://::1:80", "http://h?x=1", "https://a b"}) {
    EXPECT_EQ(Endpoint::Parse(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(EndpointAllowListTest, OnlyListedEndpointsAndExactly) {
  absl::StatusOr<EndpointAllowList> list =
      EndpointAllowList::Parse("https://s3.example.com, http://127.0.0.1:9000");
  ASSERT_TRUE(list.ok()) << list.status();
  auto check = [&](const char* url) {
    return list->Check(*Endpoint::Parse(url), /*admin=*/false).code();
  };
  EXPECT_EQ(check("https://s3.example.com:443"), absl::StatusCode::kOk);
  EXPECT_EQ(check("http://127.0.0.1:9000"), absl::StatusCode::kOk);
  // Another port, scheme or host of a listed one is not listed.
  EXPECT_EQ(check("http://s3.example.com"), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(check("http://127.0.0.1:9001"), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(check("http://169.254.169.254"), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(check("http://localhost:9000"), absl::StatusCode::kPermissionDenied);
  const absl::Status s = list->Check(*Endpoint::Parse("http://10.0.0.1:80"), false);
  EXPECT_NE(s.message().find("http://10.0.0.1:80"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--object-store-endpoints"), std::string::npos) << s;
  // An empty list allows nothing.
  EXPECT_EQ(EndpointAllowList().Check(*Endpoint::Parse("https://s3.example.com"), true).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(EndpointAllowList::Parse("https://ok.com,gopher://x").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// `aws` lets AWS's own S3 endpoints through, over https on 443 only, and
// no host that merely ends like one.
TEST(EndpointAllowListTest, AwsNamesAwsOwnS3Endpoints) {
  absl::StatusOr<EndpointAllowList> list = EndpointAllowList::Parse("aws, http://127.0.0.1:9000");
  ASSERT_TRUE(list.ok()) << list.status();
  auto code = [&](const char* url) {
    absl::StatusOr<Endpoint> e = Endpoint::Parse(url);
    if (!e.ok()) return e.status().code();
    return list->Check(*e, /*admin=*/false).code();
  };
  for (const char* ok :
       {"https://s3.amazonaws.com", "https://s3.us-east-1.amazonaws.com",
        "https://s3.eu-central-2.amazonaws.com:443", "https://s3.dualstack.ap-south-1.amazonaws.com",
        "https://s3-fips.us-gov-west-1.amazonaws.com", "https://s3.cn-north-1.amazonaws.com.cn",
        "http://127.0.0.1:9000"}) {
    EXPECT_EQ(code(ok), absl::StatusCode::kOk) << ok;
  }
  for (const char* no :
       {"http://s3.us-east-1.amazonaws.com", "https://s3.us-east-1.amazonaws.com:8443",
        "https://s3.amazonaws.com.evil.example", "https://evil-s3.us-east-1.amazonaws.com",
        "https://sts.us-east-1.amazonaws.com", "https://ec2.us-east-1.amazonaws.com",
        "https://s3.us-east-1.evil.amazonaws.com", "https://s3..amazonaws.com",
        "https://s3.1a.amazonaws.com", "https://s3.x.y.amazonaws.com",
        "https://169.254.169.254", "https://s3.example.com"}) {
    EXPECT_EQ(code(no), absl::StatusCode::kPermissionDenied) << no;
  }
  const absl::Status s = list->Check(*Endpoint::Parse("https://s3.example.com"), false);
  EXPECT_NE(s.message().find("http://127.0.0.1:9000, aws"), std::string::npos) << s;
}

// A daemon that allows admins: its own user's (and root's) sessions reach
// the endpoint their client resolved, any other user's only a listed one.
TEST(EndpointAllowListTest, AdminsReachTheirOwnEndpointsWhereAllowed) {
  EndpointAllowList list;
  const Endpoint own = *Endpoint::Parse("http://127.0.0.1:5000");
  EXPECT_EQ(list.Check(own, /*admin=*/true).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(list.empty());
  list.AllowAdmins();
  EXPECT_FALSE(list.empty());
  EXPECT_TRUE(list.Check(own, /*admin=*/true).ok());
  EXPECT_TRUE(list.Check(*Endpoint::Parse("http://169.254.169.254"), true).ok());
  EXPECT_EQ(list.Check(own, /*admin=*/false).code(), absl::StatusCode::kPermissionDenied);
}

TEST(S3UrlTest, BucketsFollowS3sRules) {
  absl::StatusOr<S3Url> u = S3Url::Parse("s3://my-bucket.1/imagenet/train/");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->bucket, "my-bucket.1");
  EXPECT_EQ(u->key, "imagenet/train/");
  u = S3Url::Parse("s3://bkt");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->key, "");
  for (const char* bad : {"s3://", "s3://ab/x", "s3://Bucket/x", "s3://-bkt/x", "s3://bkt-/x",
                          "s3://b..k/x", "s3://bu_ck/x", "s3://../etc", "/local/path",
                          "s3://a%2Fb/x"}) {
    EXPECT_EQ(S3Url::Parse(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(S3Url::Parse("s3://bkt/" + std::string(1025, 'k')).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(S3Url::Parse("s3://bkt/" + std::string(1024, 'k')).ok());
  EXPECT_TRUE(IsS3Url("s3://x"));
  EXPECT_FALSE(IsS3Url("/data/s3://x"));
}

TEST(SigV4EncodingTest, EncodesAsTheCanonicalRequestDoes) {
  EXPECT_EQ(UriEncode("a-z_A.Z~09", false), "a-z_A.Z~09");
  EXPECT_EQ(UriEncode("a b/c+d=é", false), "a%20b%2Fc%2Bd%3D%C3%A9");
  EXPECT_EQ(UriEncode("a b/c", true), "a%20b/c");
  // A key's dot segments stay the key's; '%' itself is encoded.
  EXPECT_EQ(ObjectPath("bkt", "x/../y %41.jpg"), "/bkt/x/../y%20%2541.jpg");
  EXPECT_EQ(ObjectPath("bkt", ""), "/bkt");
  // Sorted after encoding, by name then value; upper case before lower.
  EXPECT_EQ(CanonicalQuery({{"prefix", "photos/a b"}, {"list-type", "2"}, {"delimiter", "/"},
                            {"Zeta", ""}}),
            "Zeta=&delimiter=%2F&list-type=2&prefix=photos%2Fa%20b");
  EXPECT_EQ(CanonicalQuery({{"a", "2"}, {"a", "1"}, {"a-b", "0"}}), "a=1&a=2&a-b=0");
  EXPECT_EQ(CanonicalQuery({}), "");
}

}  // namespace
}  // namespace stoker
