#include "server/objstore/ca_bundle.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace stoker {
namespace {

class CaBundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ca-bundle-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string File(const std::string& name) {
    std::string path = dir_ + "/" + name;
    int fd = open(path.c_str(), O_CREAT | O_WRONLY, 0644);
    EXPECT_GE(fd, 0);
    close(fd);
    return path;
  }
  std::string dir_;
};

TEST_F(CaBundleTest, TheFirstRegularFileWins) {
  std::string missing = dir_ + "/missing.crt";
  std::string folder = dir_ + "/certs";
  ASSERT_EQ(mkdir(folder.c_str(), 0755), 0);
  std::string second = File("second.pem");
  std::string third = File("third.pem");
  EXPECT_EQ(FindCaBundle({missing, folder, second, third}), second);
  EXPECT_EQ(FindCaBundle({missing, folder}), "");
  EXPECT_EQ(FindCaBundle({}), "");
}

TEST_F(CaBundleTest, AFifoIsNotABundle) {
  std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  std::string real = File("real.pem");
  EXPECT_EQ(FindCaBundle({fifo, real}), real);
}

TEST(CaBundle, DebianAndRhelPathsComeFirst) {
  const auto& c = CaBundleCandidates();
  ASSERT_GE(c.size(), 2u);
  EXPECT_EQ(c[0], "/etc/ssl/certs/ca-certificates.crt");
  EXPECT_EQ(c[1], "/etc/pki/tls/certs/ca-bundle.crt");
  // This machine is Debian with ca-certificates installed.
  EXPECT_EQ(FindCaBundle(c), c[0]);
}

TEST(CaBundle, TheOperatorsFileComesFirst) {
  ASSERT_EQ(setenv("SSL_CERT_FILE", "/etc/hostname", 1), 0);
  EXPECT_EQ(SystemCaBundle(), "/etc/hostname");
  // Looked up once: a later change is not seen.
  ASSERT_EQ(setenv("SSL_CERT_FILE", "/nonexistent", 1), 0);
  EXPECT_EQ(SystemCaBundle(), "/etc/hostname");
}

}  // namespace
}  // namespace stoker
