#include "server/sources/arrays/gzip_stream.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

using testdata::Gzip;

// Values with structure plus noise, as a scan's voxels are.
std::string Voxels(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    s[i] = static_cast<char>((i / 512) % 200 + (x >> 29));
  }
  return s;
}

// A gzip member whose header carries FEXTRA, FNAME and FCOMMENT.
std::string GzipWithFields(const std::string& plain) {
  std::string out("\x1f\x8b\x08\x1c\0\0\0\0\0\x03", 10);
  out += std::string("\x04\0abcd", 6);  // XLEN 4, then the extra bytes.
  out += std::string("scan.nii\0", 9);
  out += std::string("a comment\0", 10);
  z_stream zs{};
  deflateInit2(&zs, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string body(deflateBound(&zs, plain.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(plain.data()));
  zs.avail_in = static_cast<uInt>(plain.size());
  zs.next_out = reinterpret_cast<Bytef*>(body.data());
  zs.avail_out = static_cast<uInt>(body.size());
  deflate(&zs, Z_FINISH);
  body.resize(zs.total_out);
  deflateEnd(&zs);
  out += body;
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(plain.data()), static_cast<uInt>(plain.size())));
  const uint32_t len = static_cast<uint32_t>(plain.size());
  out.append(reinterpret_cast<const char*>(&crc), 4);
  out.append(reinterpret_cast<const char*>(&len), 4);
  return out;
}

class GzipStreamTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testdata::MakeTempDir("gzs"); }
  // Opens `bytes` written to a file; the stream reads `size` of it
  // (default: all).
  std::unique_ptr<GzipStream> Open(const std::string& bytes, int64_t size = -1) {
    const std::string path = dir_ + "/f.gz";
    EXPECT_TRUE(testdata::WriteFile(path, bytes).ok());
    if (fd_ >= 0) close(fd_);
    fd_ = open(path.c_str(), O_RDONLY);
    EXPECT_GE(fd_, 0);
    return std::make_unique<GzipStream>(fd_, size < 0 ? bytes.size() : size, "f.gz");
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
  }
  std::string dir_;
  int fd_ = -1;
};

std::string ReadAll(GzipStream& s, size_t piece, absl::Status* error) {
  std::string out;
  std::string buf(piece, '\0');
  for (;;) {
    absl::StatusOr<size_t> got = s.Read(reinterpret_cast<uint8_t*>(buf.data()), piece);
    if (!got.ok()) {
      *error = got.status();
      return out;
    }
    out.append(buf.data(), *got);
    if (*got < piece) return out;
  }
}

TEST_F(GzipStreamTest, InflatesInPiecesOfAnySize) {
  const std::string plain = Voxels(3 << 20, 1);
  for (size_t piece : {size_t{1000}, size_t{77777}, size_t{4} << 20}) {
    std::unique_ptr<GzipStream> s = Open(Gzip(plain));
    absl::Status error;
    EXPECT_EQ(ReadAll(*s, piece, &error), plain) << piece;
    EXPECT_TRUE(error.ok()) << error;
  }
}

TEST_F(GzipStreamTest, ReadsMemberAfterMemberWithHeaderFields) {
  const std::string a = Voxels(300000, 2), b = Voxels(1, 3), c = Voxels(700001, 4);
  std::unique_ptr<GzipStream> s = Open(GzipWithFields(a) + Gzip(b) + GzipWithFields(c));
  absl::Status error;
  EXPECT_EQ(ReadAll(*s, 65536, &error), a + b + c);
  EXPECT_TRUE(error.ok()) << error;
}

TEST_F(GzipStreamTest, SaysWhetherTheMemberEndsAtALength) {
  const std::string plain = Voxels(500000, 5);
  std::string out(plain.size() - 1, '\0');
  std::unique_ptr<GzipStream> s = Open(Gzip(plain) + std::string("garbage after"));
  ASSERT_EQ(*s->Read(reinterpret_cast<uint8_t*>(out.data()), out.size()), out.size());
  EXPECT_EQ(*s->MemberEndsHere(), false);  // One byte is left.
  s = Open(Gzip(plain) + std::string("garbage after"));
  EXPECT_EQ(*s->Skip(plain.size()), plain.size());
  EXPECT_EQ(*s->MemberEndsHere(), true);  // What follows is not looked at.
  // A member read to its exact length at the file's end: its trailer may
  // still be in the inflater's own bits.
  for (size_t n : {size_t{1}, size_t{4096}, size_t{500000}}) {
    const std::string p = Voxels(n, 9);
    s = Open(Gzip(p));
    std::string got(n, '\0');
    ASSERT_EQ(*s->Read(reinterpret_cast<uint8_t*>(got.data()), n), n);
    EXPECT_EQ(got, p);
    absl::StatusOr<bool> ends = s->MemberEndsHere();
    ASSERT_TRUE(ends.ok()) << n << ": " << ends.status();
    EXPECT_TRUE(*ends) << n;
  }
}

TEST_F(GzipStreamTest, SkipsAndReadsOn) {
  const std::string plain = Voxels(1 << 20, 6);
  std::unique_ptr<GzipStream> s = Open(Gzip(plain));
  EXPECT_EQ(*s->Skip(123457), 123457u);
  std::string rest(plain.size() - 123457, '\0');
  EXPECT_EQ(*s->Read(reinterpret_cast<uint8_t*>(rest.data()), rest.size()), rest.size());
  EXPECT_EQ(rest, plain.substr(123457));
  EXPECT_EQ(*s->Skip(10), 0u);
}

TEST_F(GzipStreamTest, RefusesWhatIsNotAWholeValidStream) {
  const std::string plain = Voxels(400000, 7);
  const std::string gz = Gzip(plain);
  std::string bad_crc = gz;
  bad_crc[bad_crc.size() - 6] ^= 1;
  std::string bad_body = gz;
  bad_body[gz.size() / 2] ^= 0x55;
  struct Case {
    std::string bytes;
    int64_t size;
    const char* says;
  } cases[] = {
      {bad_crc, -1, "not a valid gzip stream"},
      {gz.substr(0, gz.size() - 3), -1, "ends inside a member"},
      {gz.substr(0, gz.size() / 3), -1, "ends inside a member"},
      {std::string("not gzip at all, just text"), -1, "not a valid gzip stream"},
      {std::string(), -1, "ends inside a member"},
      {gz, static_cast<int64_t>(gz.size()) + (1 << 20), "the file is shorter now"},
  };
  for (const Case& c : cases) {
    std::unique_ptr<GzipStream> s = Open(c.bytes, c.size);
    absl::Status error;
    const std::string got = ReadAll(*s, 1 << 20, &error);
    EXPECT_EQ(error.code(), absl::StatusCode::kDataLoss) << c.says << ": " << error;
    EXPECT_NE(error.message().find(c.says), std::string::npos) << error;
    EXPECT_NE(error.message().find("f.gz"), std::string::npos) << error;
  }
  // A flipped byte inside the deflate data: refused (a bad code, or the CRC).
  std::unique_ptr<GzipStream> s = Open(bad_body);
  absl::Status error;
  const std::string got = ReadAll(*s, 1 << 20, &error);
  EXPECT_TRUE(!error.ok() || got != plain);
  EXPECT_EQ(error.code(), absl::StatusCode::kDataLoss) << error;
}

}  // namespace
}  // namespace stoker
