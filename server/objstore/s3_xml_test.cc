#include "server/objstore/s3_xml.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace stoker {
namespace {

constexpr char kPage[] = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>bkt</Name><Prefix>train/</Prefix><KeyCount>3</KeyCount><MaxKeys>2</MaxKeys>
  <IsTruncated>true</IsTruncated>
  <Contents><Key>train/a &amp; b.jpg</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified>
    <ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag><Size>1234</Size>
    <StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>train/caf&#233;.jpg</Key><ETag>"abc-2"</ETag><Size>0</Size></Contents>
  <CommonPrefixes><Prefix>train/cat/</Prefix></CommonPrefixes>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
</ListBucketResult>)";

TEST(S3XmlTest, ReadsAListingPage) {
  absl::StatusOr<ListPage> p = ParseListPage(kPage);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->objects.size(), 2u);
  EXPECT_EQ(p->objects[0].key, "train/a & b.jpg");
  EXPECT_EQ(p->objects[0].size, 1234u);
  EXPECT_EQ(p->objects[0].etag, "9b2cf535f27731c974343645a3985328");
  EXPECT_EQ(p->objects[1].key, "train/caf\xc3\xa9.jpg");
  EXPECT_EQ(p->objects[1].etag, "abc-2");
  EXPECT_EQ(p->prefixes, std::vector<std::string>{"train/cat/"});
  EXPECT_TRUE(p->truncated);
  EXPECT_EQ(p->next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
}

TEST(S3XmlTest, RepliesThatLieAreDataLoss) {
  auto code = [](const std::string& xml) { return ParseListPage(xml).status().code(); };
  EXPECT_EQ(code("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>"),
            absl::StatusCode::kDataLoss);  // No token to go on with.
  EXPECT_EQ(code("<ListBucketResult><Contents><Key>a</Key><Size>-1</Size></Contents>"
                 "</ListBucketResult>"),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(code("<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>"),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(code("<ListBucketResult><Contents><Key>a</Contents>"), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code(""), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code("not xml"), absl::StatusCode::kDataLoss);
  // Entities of the server's own (a billion laughs) are refused outright.
  EXPECT_EQ(code("<?xml version=\"1.0\"?><!DOCTYPE l [<!ENTITY a \"aaaaaaaa\">"
                 "<!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;\">]><ListBucketResult><Contents>"
                 "<Key>&b;</Key></Contents></ListBucketResult>"),
            absl::StatusCode::kDataLoss);
  // A text over 4 KiB, nesting past 16, more than 10,000 entries.
  EXPECT_EQ(code(absl::StrCat("<ListBucketResult><Contents><Key>", std::string(5000, 'k'),
                              "</Key></Contents></ListBucketResult>")),
            absl::StatusCode::kDataLoss);
  std::string deep;
  for (int i = 0; i < 20; ++i) deep = "<a>" + deep + "</a>";
  EXPECT_EQ(code(deep), absl::StatusCode::kDataLoss);
  std::string many = "<ListBucketResult>";
  for (int i = 0; i < 10001; ++i) absl::StrAppend(&many, "<Contents><Key>k", i, "</Key></Contents>");
  EXPECT_EQ(code(many + "</ListBucketResult>"), absl::StatusCode::kDataLoss);
}

TEST(S3XmlTest, ErrorCodesOnlyNeverTheMessage) {
  EXPECT_EQ(S3ErrorCode("<?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code>"
                        "<Message>secret canonical request</Message></Error>"),
            "SignatureDoesNotMatch");
  EXPECT_EQ(S3ErrorCode("<Error><Code>Bad code with spaces</Code></Error>"), "");
  EXPECT_EQ(S3ErrorCode("<Error><Code>" + std::string(65, 'A') + "</Code></Error>"), "");
  EXPECT_EQ(S3ErrorCode("garbage"), "");
  EXPECT_EQ(S3ErrorCode(""), "");
}

}  // namespace
}  // namespace stoker
