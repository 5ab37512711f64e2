// The slab-and-fence protocol, driven through SlabMemory so that every
// kind of slab runs the same tests (the host's; a GPU's where the machine
// has one, else skipped saying why): a daemon and three trainer processes
// hand 10,000 batches each over slabs passed by descriptor with none
// corrupted; a slab is written only after its release; a trainer that
// breaks the protocol, holds a slab or hands back a wrong descriptor gets
// a clear error.
#include "shm/batch_slabs.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shm/cuda_slabs.h"
#include "shm/fd_passing.h"

namespace stoker::shm {
namespace {

class BatchSlabsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<SlabMemory>> memory = SlabMemoryOfKind(GetParam());
    if (!memory.ok()) GTEST_SKIP() << GetParam() << " slabs: " << memory.status();
    memory_ = *std::move(memory);
  }
  std::unique_ptr<SlabMemory> memory_;
};

// Batch k of slab s: every 8-byte word is (s, k, its index), so a byte
// from another slab, batch or place shows. Written and read through the
// slab's copies (a GPU's slab is not host memory).
uint64_t Word(uint32_t s, uint64_t k, uint64_t i) { return (k << 32) ^ (uint64_t{s} << 24) ^ i; }
bool Fill(const Slab& slab, uint32_t s, uint64_t k) {
  std::vector<uint64_t> w(slab.bytes() / 8);
  for (uint64_t i = 0; i < w.size(); ++i) w[i] = Word(s, k, i);
  return slab.Write(0, w.data(), w.size() * 8).ok();
}
uint64_t Mismatches(const Slab& slab, uint32_t s, uint64_t k) {
  std::vector<uint64_t> w(slab.bytes() / 8);
  if (!slab.Read(0, w.data(), w.size() * 8).ok()) return w.size();
  uint64_t bad = 0;
  for (uint64_t i = 0; i < w.size(); ++i) bad += w[i] != Word(s, k, i);
  return bad;
}

constexpr uint32_t kSlabs = 4;
constexpr uint64_t kBytes = 64 << 10;
constexpr uint64_t kBatches = 10000;  // Per trainer: 2,500 per slab.

// A trainer process: its ring's slabs and fences from `sock` alone (the
// message names its ring t, whose slab s is pattern slab t * kSlabs + s);
// every batch checked, then released. Its exit status.
int Trainer(int sock, SlabMemory& memory) {
  std::string message;
  std::vector<int> got;
  if (!ReceiveWithFds(sock, 64, kSlabs + 1, &message, &got, absl::Now() + absl::Seconds(20))
           .ok() ||
      got.size() != kSlabs + 1) {
    return 2;
  }
  const uint32_t ring = static_cast<uint32_t>(std::strtoul(message.c_str() + 6, nullptr, 10));
  absl::StatusOr<SlabFences> fences = SlabFences::Map(got[kSlabs], kSlabs);
  if (!fences.ok()) return 4;
  std::vector<std::unique_ptr<Slab>> imported;
  for (uint32_t s = 0; s < kSlabs; ++s) {
    absl::StatusOr<std::unique_ptr<Slab>> slab = memory.Import(got[s], kBytes);
    if (!slab.ok()) return 3;
    imported.push_back(*std::move(slab));
  }
  CloseFds(&got);  // Imported: the mappings hold the slabs.
  uint64_t bad = 0;
  for (uint64_t b = 0; b < kBatches; ++b) {
    const uint32_t s = b % kSlabs;
    if (!fences->AwaitReadable(s, b / kSlabs, absl::Now() + absl::Seconds(20)).ok()) return 5;
    bad += Mismatches(*imported[s], ring * kSlabs + s, b / kSlabs);
    fences->Released(s, b / kSlabs);
  }
  return bad == 0 ? 0 : 6;
}

// A trainer is this binary executed again (a GPU's context does not
// survive fork): "<socket fd> <kind>" in $STOKER_SLAB_TRAINER, before main.
[[maybe_unused]] const int kTrainerRun = [] {
  const char* as = std::getenv("STOKER_SLAB_TRAINER");
  if (as == nullptr) return 0;
  int sock = -1;
  char kind[16] = {};
  if (std::sscanf(as, "%d %15s", &sock, kind) != 2) _exit(8);
  absl::StatusOr<std::unique_ptr<SlabMemory>> memory = SlabMemoryOfKind(kind);
  _exit(memory.ok() ? Trainer(sock, **memory) : 7);
}();

// Three trainer processes, each with a ring of its own; the daemon (this
// process) writes each ring's batches in turn.
TEST_P(BatchSlabsTest, ThreeTrainersTake10000BatchesEachWithNoneCorrupted) {
  constexpr uint32_t kTrainers = 3;
  struct Ring {
    std::unique_ptr<SlabFences> fences;
    std::vector<std::unique_ptr<Slab>> slabs;
    pid_t pid = -1;
  };
  std::vector<Ring> rings(kTrainers);
  for (uint32_t t = 0; t < kTrainers; ++t) {
    absl::StatusOr<SlabFences> fences = SlabFences::Create(kSlabs);
    ASSERT_TRUE(fences.ok()) << fences.status();
    rings[t].fences = std::make_unique<SlabFences>(*std::move(fences));
    std::vector<int> fds;
    for (uint32_t s = 0; s < kSlabs; ++s) {
      absl::StatusOr<std::unique_ptr<Slab>> slab = memory_->Create(kBytes);
      ASSERT_TRUE(slab.ok()) << slab.status();
      absl::StatusOr<int> fd = (*slab)->Export();
      ASSERT_TRUE(fd.ok()) << fd.status();
      fds.push_back(*fd);
      rings[t].slabs.push_back(*std::move(slab));
    }
    absl::StatusOr<int> fences_fd = rings[t].fences->Share();
    ASSERT_TRUE(fences_fd.ok()) << fences_fd.status();
    fds.push_back(*fences_fd);
    int pair[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    // Made before fork: the child only closes, clears a flag and execs.
    // The loader's path goes along: a bundle of the tests finds its
    // libraries by it (bench/gpu_checks.sh).
    const std::string as = absl::StrCat("STOKER_SLAB_TRAINER=", pair[1], " ", GetParam());
    const char* lib_path = std::getenv("LD_LIBRARY_PATH");
    const std::string lib = absl::StrCat("LD_LIBRARY_PATH=", lib_path ? lib_path : "");
    char* const env[] = {const_cast<char*>(as.c_str()), const_cast<char*>(lib.c_str()),
                         nullptr};
    rings[t].pid = fork();
    ASSERT_GE(rings[t].pid, 0);
    if (rings[t].pid == 0) {  // No gtest in the child: its exit status says.
      close(pair[0]);
      fcntl(pair[1], F_SETFD, 0);
      execle("/proc/self/exe", "batch_slabs_test", static_cast<char*>(nullptr), env);
      _exit(9);
    }
    close(pair[1]);
    ASSERT_TRUE(SendWithFds(pair[0], absl::StrCat("slabs ", t, "\n"), fds).ok());
    CloseFds(&fds);
    close(pair[0]);
  }
  for (uint64_t b = 0; b < kBatches; ++b) {
    const uint32_t s = b % kSlabs;
    for (uint32_t t = 0; t < kTrainers; ++t) {
      const SlabFences& fences = *rings[t].fences;
      ASSERT_TRUE(fences.AwaitWritable(s, b / kSlabs, absl::Now() + absl::Seconds(20)).ok())
          << t << " " << b;
      ASSERT_TRUE(Fill(*rings[t].slabs[s], t * kSlabs + s, b / kSlabs));
      fences.Written(s, b / kSlabs);
    }
  }
  for (uint32_t t = 0; t < kTrainers; ++t) {
    int wstatus = 0;
    ASSERT_EQ(waitpid(rings[t].pid, &wstatus, 0), rings[t].pid);
    ASSERT_TRUE(WIFEXITED(wstatus));
    EXPECT_EQ(WEXITSTATUS(wstatus), 0)
        << "2 receive, 3 import, 4 fences, 5 wait, 6 corrupted, 7 kind, 9 exec";
    for (uint32_t s = 0; s < kSlabs; ++s) {
      EXPECT_EQ(rings[t].fences->Count(s), 2 * (kBatches / kSlabs)) << "every batch released";
    }
  }
}

TEST_P(BatchSlabsTest, ASlabIsWrittenOnlyAfterItsRelease) {
  absl::StatusOr<SlabFences> daemon = SlabFences::Create(2);
  ASSERT_TRUE(daemon.ok());
  absl::StatusOr<int> fd = daemon->Share();
  ASSERT_TRUE(fd.ok());
  absl::StatusOr<SlabFences> trainer = SlabFences::Map(*fd, 2);
  close(*fd);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE(daemon->AwaitWritable(1, 0, absl::InfinitePast()).ok()) << "batch 0 at once";
  EXPECT_EQ(trainer->AwaitReadable(1, 0, absl::InfinitePast()).code(),
            absl::StatusCode::kDeadlineExceeded)
      << "not written yet";
  daemon->Written(1, 0);
  ASSERT_TRUE(trainer->AwaitReadable(1, 0, absl::InfinitePast()).ok());
  // Held by the trainer: the daemon's next batch in that slab waits (to its
  // deadline, or until its session is cancelled); the other slab is free.
  const absl::Status held = daemon->AwaitWritable(1, 1, absl::Now() + absl::Milliseconds(20));
  EXPECT_EQ(held.code(), absl::StatusCode::kDeadlineExceeded) << held;
  EXPECT_NE(held.message().find("slab 1: the trainer's release did not come"),
            std::string::npos)
      << held;
  std::atomic<bool> cancel{true};
  EXPECT_EQ(daemon->AwaitWritable(1, 1, absl::InfiniteFuture(), &cancel).code(),
            absl::StatusCode::kCancelled);
  // Raised while it waits (a session closed): the wait ends.
  cancel = false;
  std::thread closer([&] { cancel = true; });
  EXPECT_EQ(daemon->AwaitWritable(1, 1, absl::Now() + absl::Seconds(60), &cancel).code(),
            absl::StatusCode::kCancelled);
  closer.join();
  EXPECT_TRUE(daemon->AwaitWritable(0, 0, absl::InfinitePast()).ok());
  trainer->Released(1, 0);
  EXPECT_TRUE(daemon->AwaitWritable(1, 1, absl::InfinitePast()).ok());
  // Counts wrap modulo 2^32 past batch 2^31.
  for (uint64_t k : {(uint64_t{1} << 31) - 1, uint64_t{1} << 31, (uint64_t{1} << 32) + 5}) {
    daemon->Written(0, k);
    ASSERT_TRUE(trainer->AwaitReadable(0, k, absl::InfinitePast()).ok()) << k;
    trainer->Released(0, k);
    ASSERT_TRUE(daemon->AwaitWritable(0, k + 1, absl::InfinitePast()).ok()) << k;
  }
  EXPECT_EQ(daemon->AwaitWritable(2, 0, absl::InfinitePast()).code(),
            absl::StatusCode::kInvalidArgument)
      << "no slab 2";
}

TEST_P(BatchSlabsTest, ATrainerThatBreaksTheProtocolIsRefusedNotWaitedFor) {
  absl::StatusOr<SlabFences> daemon = SlabFences::Create(1);
  ASSERT_TRUE(daemon.ok());
  absl::StatusOr<int> fd = daemon->Share();
  ASSERT_TRUE(fd.ok());
  // What a hostile trainer maps: the page, to write into as it likes.
  void* page = mmap(nullptr, 4, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
  close(*fd);
  ASSERT_NE(page, MAP_FAILED);
  daemon->Written(0, 0);
  for (uint32_t lie : {7u, 0xffffffffu, 2u * 5}) {
    static_cast<std::atomic<uint32_t>*>(page)->store(lie);
    const absl::Status s = daemon->AwaitWritable(0, 1, absl::Now() + absl::Seconds(60));
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << lie;
    EXPECT_NE(s.message().find(absl::StrCat("holds ", lie, " where 1 or 2 was due")),
              std::string::npos)
        << s;
  }
  // Before the first batch the count can only be 0.
  static_cast<std::atomic<uint32_t>*>(page)->store(0xffffffffu);
  EXPECT_EQ(daemon->AwaitWritable(0, 0, absl::Now() + absl::Seconds(60)).code(),
            absl::StatusCode::kFailedPrecondition);
  munmap(page, 4);
}

TEST_P(BatchSlabsTest, ImportRefusesAWrongSizeOrADescriptorThatIsNoSlab) {
  absl::StatusOr<std::unique_ptr<Slab>> slab = memory_->Create(8192);
  ASSERT_TRUE(slab.ok()) << slab.status();
  absl::StatusOr<int> fd = (*slab)->Export();
  ASSERT_TRUE(fd.ok());
  // More than was made (a GPU's slab is whole granules of 2 MiB or so).
  absl::StatusOr<std::unique_ptr<Slab>> bigger = memory_->Import(*fd, 64 << 20);
  EXPECT_EQ(bigger.status().code(), absl::StatusCode::kInvalidArgument) << bigger.status();
  absl::StatusOr<std::unique_ptr<Slab>> same = memory_->Import(*fd, 8192);
  ASSERT_TRUE(same.ok()) << same.status();
  const std::vector<uint8_t> marks(100, 0x5a);
  ASSERT_TRUE((*slab)->Write(8092, marks.data(), 100).ok());
  std::vector<uint8_t> seen(100);
  ASSERT_TRUE((*same)->Read(8092, seen.data(), 100).ok());
  EXPECT_EQ(seen, marks) << "one memory";
  EXPECT_EQ((*same)->Read(8093, seen.data(), 100).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*slab)->Write(~uint64_t{0}, marks.data(), 2).code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*same)->Export().status().code(), absl::StatusCode::kFailedPrecondition);
  close(*fd);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  EXPECT_EQ(memory_->Import(pipe_fds[0], 8192).status().code(),
            absl::StatusCode::kFailedPrecondition);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  // A memory file its sender could shrink under the mapping is refused.
  const int loose = memfd_create("stoker-test-loose-slab", MFD_CLOEXEC);
  ASSERT_GE(loose, 0);
  ASSERT_EQ(ftruncate(loose, 8192), 0);
  EXPECT_EQ(memory_->Import(loose, 8192).status().code(), absl::StatusCode::kFailedPrecondition);
  close(loose);
  EXPECT_EQ(memory_->Create(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SlabFences::Create(0).status().code(), absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Kinds, BatchSlabsTest, ::testing::Values("host", "cuda"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace stoker::shm
