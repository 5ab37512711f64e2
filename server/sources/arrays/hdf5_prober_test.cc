#include "server/sources/arrays/hdf5_prober.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5/serial/hdf5.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/testdata.h"

namespace stoker {
namespace h5 {
namespace {
namespace fs = std::filesystem;

// A small file with a contiguous dataset "x" of 6 int32.
std::string WriteSmall(const std::string& dir) {
  const std::string path = dir + "/s.h5";
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t n = 6;
  const hid_t space = H5Screate_simple(1, &n, nullptr);
  const hid_t set = H5Dcreate2(f, "x", H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const int v[6] = {1, 2, 3, 4, 5, 6};
  H5Dwrite(set, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
  H5Dclose(set);
  H5Sclose(space);
  H5Fclose(f);
  return path;
}

// A reader program that does `body` (a shell script).
std::string Script(const std::string& dir, const std::string& name, const std::string& body) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  chmod(path.c_str(), 0755);
  return path;
}

class ProberTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testdata::MakeTempDir("h5-prober");
    file_ = WriteSmall(dir_);
    fd_ = open(file_.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    fstat(fd_, &st);
    size_ = static_cast<uint64_t>(st.st_size);
  }
  void TearDown() override {
    close(fd_);
    fs::remove_all(dir_);
  }
  std::string dir_, file_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The reader runs shut in: a system-call filter, no new privileges, and
// never as root; it describes the file and stays for the next one.
TEST_F(ProberTest, TheReaderDescribesFilesFromInsideItsSandbox) {
  Prober prober;
  for (int round = 0; round < 2; ++round) {
    absl::StatusOr<h5probe::Answer> a = prober.Describe(fd_, size_, {"x", "nope"}, file_);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_EQ(a->datasets.size(), 2u);
    ASSERT_TRUE(a->datasets[0].ok()) << a->datasets[0].status();
    EXPECT_EQ(a->datasets[0]->dims, std::vector<uint64_t>{6});
    EXPECT_EQ(a->datasets[0]->layout, h5probe::Layout::kContiguous);
    EXPECT_EQ(a->datasets[0]->stored, 24u);
    EXPECT_EQ(a->datasets[1].status().code(), absl::StatusCode::kFailedPrecondition);
  }
  EXPECT_EQ(prober.started(), 1u);
  std::ifstream in("/proc/" + std::to_string(prober.pid()) + "/status");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string status = ss.str();
  EXPECT_NE(status.find("\nSeccomp:\t2"), std::string::npos) << status;
  EXPECT_NE(status.find("\nNoNewPrivs:\t1"), std::string::npos) << status;
  EXPECT_EQ(status.find("\nUid:\t0\t"), std::string::npos) << status;
}

// A reader that crashes, hangs or cannot start costs that file, named;
// the next file gets a fresh reader.
TEST_F(ProberTest, AReaderThatCrashesOrHangsIsThatFilesError) {
  Prober crashing(Script(dir_, "crash", "kill -SEGV $$"));
  absl::StatusOr<h5probe::Answer> a = crashing.Describe(fd_, size_, {"x"}, file_);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(a.status().message().find(file_ + ": the HDF5 reader failed on it"), std::string::npos)
      << a.status();
  EXPECT_NE(a.status().message().find("killed by signal 11"), std::string::npos) << a.status();
  a = crashing.Describe(fd_, size_, {"x"}, file_);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(crashing.started(), 2u);
  EXPECT_EQ(crashing.lost(), 2u);

  Prober hanging(Script(dir_, "hang", "exec python3 -c 'import signal; signal.pause()'"));
  hanging.set_timeout_ms(200);
  a = hanging.Describe(fd_, size_, {"x"}, file_);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(a.status().message(), file_ + ": the HDF5 reader did not finish with it in 0.2 s");
  EXPECT_EQ(hanging.pid(), -1);  // Killed and reaped.

  Prober missing(dir_ + "/no-such-reader");
  a = missing.Describe(fd_, size_, {"x"}, file_);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(a.status().message().find("--hdf5-reader"), std::string::npos) << a.status();
}


// A reader (a Python script on fd 3) that sends `answers` well-formed
// answers ("no such dataset"), reading a request before each only with
// `read_first`; either way it then ignores its socket's end and waits for
// a signal that never comes.
std::string LyingReader(const std::string& dir, const std::string& name, int answers,
                        bool read_first) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << "#!/usr/bin/python3\n"
                         "import os, signal, struct\n"
                         "msg = b\"has no dataset\"\n"
                         "body = struct.pack(\"<IBI\", 1, 9, len(msg)) + msg\n"
                      << "for _ in range(" << answers << "):\n"
                      << (read_first ? "    os.read(3, 65536)\n" : "")
                      << "    os.write(3, struct.pack(\"<I\", len(body)) + body)\n"
                         "signal.pause()\n";
  chmod(path.c_str(), 0755);
  return path;
}

// A reader that answers before it has read its request answers nothing
// asked: that file's error, the reader killed. One that then ignores its
// socket's end never holds the daemon's thread: it is killed, not awaited.
TEST_F(ProberTest, AReaderThatAnswersUnaskedOrStaysIsKilled) {
  {
    Prober eager(LyingReader(dir_, "eager", 1000, /*read_first=*/false));
    absl::StatusOr<h5probe::Answer> a = eager.Describe(fd_, size_, {"x"}, file_);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(a.status().message().find("answered before reading its request"),
              std::string::npos)
        << a.status();
    EXPECT_EQ(eager.lost(), 1u);
  }
  std::optional<Prober> staying;
  staying.emplace(LyingReader(dir_, "staying", 1, /*read_first=*/true));
  absl::StatusOr<h5probe::Answer> a = staying->Describe(fd_, size_, {"x"}, file_);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->datasets[0].status().code(), absl::StatusCode::kFailedPrecondition);
  const pid_t pid = staying->pid();
  ASSERT_GT(pid, 0);
  staying.reset();  // Returns: the reader is killed and reaped.
  EXPECT_NE(kill(pid, 0), 0);
}

}  // namespace
}  // namespace h5
}  // namespace stoker
