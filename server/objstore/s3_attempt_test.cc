// What a reply's header lines and body bytes put into an attempt's facts.
#include "server/objstore/s3_attempt.h"

#include <string>

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(S3AttemptTest, HeaderLinesAreTakenAndAStatusLineStartsOver) {
  AttemptFacts f;
  f.cap = 100;
  f.attempt = 2;
  TakeHeaderLine("ETag: \"abc\"\r\n", &f);
  TakeHeaderLine("x-amz-version-id: v1\r\n", &f);
  TakeHeaderLine("Content-Range: bytes 0-9/50\r\n", &f);
  TakeHeaderLine("Content-Length: 10\r\n", &f);
  TakeHeaderLine(std::string("x-amz-version-id: ") + std::string(2000, 'x'), &f);
  EXPECT_EQ(f.etag, "abc");
  EXPECT_EQ(f.version_id, "v1");  // A value over 1 KiB is ignored.
  EXPECT_EQ(f.content_range, "bytes 0-9/50");
  EXPECT_TRUE(f.has_length);
  EXPECT_EQ(f.content_length, 10u);
  TakeHeaderLine("HTTP/1.1 200 OK\r\n", &f);  // After a 100 Continue.
  EXPECT_EQ(f.etag, "");
  EXPECT_FALSE(f.has_length);
  EXPECT_EQ(f.cap, 100u);
  EXPECT_EQ(f.attempt, 2);
}

TEST(S3AttemptTest, ABodyStopsAtItsCapAndAnErrorsAtItsOwn) {
  AttemptFacts f;
  f.cap = 8;
  EXPECT_TRUE(TakeBody("12345", 206, &f));
  EXPECT_FALSE(TakeBody("6789", 0, &f));
  EXPECT_TRUE(f.over_cap);
  EXPECT_EQ(f.body, "12345");
  // An error's XML is read to its own cap, not the range's.
  AttemptFacts e;
  e.cap = 8;
  EXPECT_TRUE(TakeBody("<Error><Code>SlowDown</Code></Error>", 503, &e));
  EXPECT_EQ(e.cap, kMaxErrorBody);
  EXPECT_FALSE(e.over_cap);
}

TEST(S3AttemptTest, TransportFailuresWorthAnotherAttempt) {
  EXPECT_TRUE(RetryableCurl(CURLE_OPERATION_TIMEDOUT));
  EXPECT_TRUE(RetryableCurl(CURLE_RECV_ERROR));
  EXPECT_FALSE(RetryableCurl(CURLE_ABORTED_BY_CALLBACK));
  EXPECT_FALSE(RetryableCurl(CURLE_WRITE_ERROR));
}

}  // namespace
}  // namespace stoker
