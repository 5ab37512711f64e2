#include "server/h5probe/protocol.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace stoker {
namespace h5probe {
namespace {

Answer Sample() {
  Dataset d;
  d.dims = {3, 4};
  d.plain = true;
  d.is_float = true;
  d.big_endian = true;
  d.size = 4;
  d.layout = Layout::kChunked;
  d.chunk = {2, 4};
  d.filters = {{2, 0}, {1, 1}};
  d.chunks = {{4096, 30, 0}, {0, 0, 0}};
  d.fill = std::string("\x00\x00\x80\x3f", 4);
  Answer a;
  a.datasets.push_back(d);
  a.datasets.push_back(absl::PermissionDeniedError("dataset 'e' is an external link"));
  return a;
}

TEST(ProtocolTest, AnswersAndRequestsRoundTrip) {
  absl::StatusOr<Answer> back = DecodeAnswer(EncodeAnswer(Sample()));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->datasets.size(), 2u);
  const Dataset& d = *back->datasets[0];
  EXPECT_EQ(d.dims, (std::vector<uint64_t>{3, 4}));
  EXPECT_TRUE(d.plain && d.is_float && d.big_endian && !d.is_signed);
  EXPECT_EQ(d.layout, Layout::kChunked);
  ASSERT_EQ(d.filters.size(), 2u);
  EXPECT_EQ(d.filters[1].id, 1u);
  ASSERT_EQ(d.chunks.size(), 2u);
  EXPECT_EQ(d.chunks[0].offset, 4096u);
  EXPECT_EQ(d.chunks[0].size, 30u);
  EXPECT_EQ(d.fill.size(), 4u);
  EXPECT_EQ(back->datasets[1].status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(back->datasets[1].status().message(), "dataset 'e' is an external link");
  Request r{1234, {"x", "labels"}};
  absl::StatusOr<Request> rb = DecodeRequest(EncodeRequest(r));
  ASSERT_TRUE(rb.ok());
  EXPECT_EQ(rb->file_size, 1234u);
  EXPECT_EQ(rb->names, r.names);
}

// Whatever the reader sends, a malformed answer is DATA_LOSS: cut at every
// length, a count claiming more items than the bytes hold, a status code
// that is not one.
TEST(ProtocolTest, MalformedAnswersAreDataLoss) {
  const std::string good = EncodeAnswer(Sample());
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_EQ(DecodeAnswer(good.substr(0, n)).status().code(), absl::StatusCode::kDataLoss) << n;
  }
  EXPECT_EQ(DecodeAnswer(good + "x").status().code(), absl::StatusCode::kDataLoss);
  std::string huge = good;
  const uint32_t lots = 0xffffffffu;
  huge.replace(5, 4, reinterpret_cast<const char*>(&lots), 4);  // The dims count.
  EXPECT_EQ(DecodeAnswer(huge).status().code(), absl::StatusCode::kDataLoss);
  std::string code = EncodeAnswer(Sample());
  code[4] = static_cast<char>(200);
  EXPECT_EQ(DecodeAnswer(code).status().code(), absl::StatusCode::kDataLoss);
}

// A frame carries its descriptor; one longer than allowed is refused, and
// a peer that says nothing is DEADLINE_EXCEEDED, one that left UNAVAILABLE.
TEST(ProtocolTest, FramesCarryADescriptorAndAreBounded) {
  int s[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s), 0);
  const int file = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(file, 0);
  const std::string big(200 * 1024, 'b');  // Several reads' worth.
  ASSERT_TRUE(SendFrame(s[0], big, file).ok());
  std::string got;
  int fd = -1;
  ASSERT_TRUE(ReceiveFrame(s[1], kMaxAnswerBytes, 5000, &got, &fd).ok());
  EXPECT_EQ(got, big);
  ASSERT_GE(fd, 0);
  struct stat a {}, b {};
  ASSERT_EQ(fstat(fd, &a), 0);
  ASSERT_EQ(fstat(file, &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  close(fd);
  ASSERT_TRUE(SendFrame(s[0], std::string(100, 'x')).ok());
  EXPECT_EQ(ReceiveFrame(s[1], 99, 5000, &got, &fd).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(fd, -1);
  int t[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, t), 0);
  EXPECT_EQ(ReceiveFrame(t[1], 99, 10, &got, &fd).code(), absl::StatusCode::kDeadlineExceeded);
  close(t[0]);
  EXPECT_EQ(ReceiveFrame(t[1], 99, 5000, &got, &fd).code(), absl::StatusCode::kUnavailable);
  close(t[1]);
  close(file);
  close(s[0]);
  close(s[1]);
}

}  // namespace
}  // namespace h5probe
}  // namespace stoker
