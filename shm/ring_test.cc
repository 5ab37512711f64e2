#include "shm/ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "shm/fd_passing.h"
#include "shm/futex.h"

namespace stoker::shm {
namespace {

std::string TestName(const char* what) {
  return absl::StrCat("stoker-test.", getpid(), ".", what, ".",
                      MonotonicNanos());
}

// The producer's ring as a client maps it: from a descriptor it hands out.
absl::StatusOr<std::unique_ptr<RingConsumer>> ConsumerOf(
    const RingProducer& p, uint64_t session_id) {
  absl::StatusOr<int> fd = p.Share();
  if (!fd.ok()) return fd.status();
  auto c = RingConsumer::Open(*fd, p.name(), session_id);
  close(*fd);
  return c;
}

// The producer's whole segment as any holder of a descriptor maps it.
absl::StatusOr<Segment> MapShared(const RingProducer& p) {
  absl::StatusOr<int> fd = p.Share();
  if (!fd.ok()) return fd.status();
  auto seg = Segment::Map(*fd, p.name());
  close(*fd);
  return seg;
}

RingGeometry SmallGeometry(uint32_t slots) {
  return ImageLabelGeometry(slots, 4, 16, 16, 3, kDTypeUint8);
}

int32_t* Labels(const SlotView& v) { return reinterpret_cast<int32_t*>(v.fields[1]); }

// Fills a claimed slot with a pattern derived from `seq`.
void FillPattern(const SlotView& v, const RingLayout& h, uint64_t seq) {
  for (uint32_t i = 0; i < h.batch_size; ++i) {
    Labels(v)[i] = static_cast<int32_t>(seq * 7 + i);
    v.status[i] = kSampleOk;
  }
  for (uint64_t b = 0; b < h.fields[0].sample_bytes * h.batch_size; ++b) {
    v.fields[0][b] = static_cast<uint8_t>(seq * 31 + b * 7);
  }
}

// Number of bytes/labels in the slot that do not match the pattern.
int CountMismatches(const SlotView& v, const RingLayout& h, uint64_t seq) {
  int bad = 0;
  for (uint32_t i = 0; i < h.batch_size; ++i) {
    bad += Labels(v)[i] != static_cast<int32_t>(seq * 7 + i);
  }
  for (uint64_t b = 0; b < h.fields[0].sample_bytes * h.batch_size; ++b) {
    bad += v.fields[0][b] != static_cast<uint8_t>(seq * 31 + b * 7);
  }
  return bad;
}

// A consumer trusts nothing in the header it did not check: every offset
// must be the one the geometry implies and fit the mapping, and a slot's
// counts must fit the batch.
TEST(ConsumerTest, RejectsCorruptHeadersAndSlots) {
  const std::string name = TestName("corrupt");
  auto p = RingProducer::Create(name, SmallGeometry(2), 5, 1);
  ASSERT_TRUE(p.ok()) << p.status();
  auto shared = MapShared(**p);  // The header as any writer sees it.
  ASSERT_TRUE(shared.ok()) << shared.status();
  auto* layout = &static_cast<RingHeader*>(shared->base())->layout;
  const RingLayout good = *layout;
  struct Patch {
    const char* field;
    std::function<void(RingLayout*)> apply;
  };
  const Patch patches[] = {
      {"field offset", [](RingLayout* l) { l->fields[0].offset += 4096; }},
      {"slot_stride", [](RingLayout* l) { l->slot_stride *= 2; }},
      {"label offset", [](RingLayout* l) { l->fields[1].offset = 1 << 30; }},
      {"slot_count", [](RingLayout* l) { l->slot_count = 200; }},
      {"batch_size", [](RingLayout* l) { l->batch_size = 1000; }},
      {"height", [](RingLayout* l) { l->fields[0].shape[0] = 0; }},
      {"field_count", [](RingLayout* l) { l->field_count = 17; }},
      {"field name", [](RingLayout* l) { std::memset(l->fields[1].name, 'x', 32); }},
      {"dtype", [](RingLayout* l) { l->fields[0].dtype = 9; }},
  };
  for (const Patch& patch : patches) {
    *layout = good;
    patch.apply(layout);
    auto c = ConsumerOf(**p, 5);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition)
        << patch.field << ": " << c.status();
  }
  *layout = good;
  auto c = ConsumerOf(**p, 5);
  ASSERT_TRUE(c.ok()) << c.status();
  // A published slot claiming more samples than the batch holds.
  int slot = (*p)->Claim([] { return false; });
  (*p)->Publish(slot, 0, 0, 0, 4, 0);
  (*p)->Slot(slot).control->sample_count = 5;
  auto got = (*c)->Acquire(0, absl::Seconds(5), nullptr);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << got.status();
  // Later changes to the shared header do not move the consumer's views.
  layout->slot_count = 256;
  EXPECT_EQ((*c)->layout().slot_count, 2u);
}

TEST(LayoutTest, RejectsBadGeometryWithFieldName) {
  RingGeometry g = SmallGeometry(0);
  auto s = ComputeLayout(g).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("slots"), std::string::npos);
  g = SmallGeometry(257);
  EXPECT_EQ(ComputeLayout(g).status().code(),
            absl::StatusCode::kInvalidArgument);
  g = SmallGeometry(4);
  g.batch_size = 0;
  EXPECT_NE(ComputeLayout(g).status().message().find("batch_size"),
            std::string::npos);
  // 256 slots of 1024 x 224x224x3 bytes is ~38 GiB: refused.
  g = ImageLabelGeometry(256, 1024, 224, 224, 3, kDTypeUint8);
  s = ComputeLayout(g).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("exceeds"), std::string::npos);
  // Fields: names, dtypes and dimensions are checked and named.
  g = SmallGeometry(2);
  g.fields[1].name = "image";
  EXPECT_NE(ComputeLayout(g).status().message().find("named twice"),
            std::string::npos);
  g = SmallGeometry(2);
  g.fields[1].name = "bad name";
  EXPECT_NE(ComputeLayout(g).status().message().find("'bad name'"),
            std::string::npos);
  g = SmallGeometry(2);
  g.fields[1].dtype = 0;
  EXPECT_NE(ComputeLayout(g).status().message().find("dtype"), std::string::npos);
  g = SmallGeometry(2);
  g.fields[0].shape = {1, 2, 3, 4, 5, 6, 7};
  EXPECT_NE(ComputeLayout(g).status().message().find("dimensions"),
            std::string::npos);
  g.fields.clear();
  EXPECT_EQ(ComputeLayout(g).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LayoutTest, OffsetsAreAlignedAndNonOverlapping) {
  RingGeometry g = SmallGeometry(3);
  g.batch_size = 5;
  g.fields[0].shape = {32, 32, 3};
  g.fields.push_back(FieldGeometry{"volume", kDTypeFloat32, {2, 3, 5}});
  auto h = ComputeLayout(g);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->field_count, 3u);
  EXPECT_EQ(h->fields[0].sample_bytes, 32u * 32u * 3u);
  EXPECT_EQ(h->fields[1].sample_bytes, 4u);
  EXPECT_EQ(h->fields[2].sample_bytes, 2u * 3u * 5u * 4u);
  EXPECT_EQ(h->fields[2].ndim, 3u);
  EXPECT_STREQ(h->fields[2].name, "volume");
  EXPECT_EQ(FindField(*h, "volume"), 2);
  EXPECT_EQ(FindField(*h, "mask"), -1);
  EXPECT_EQ(h->fields[0].offset % kPageBytes, 0u);  // >= a page: aligned.
  EXPECT_EQ(h->fields[1].offset % 64, 0u);
  EXPECT_EQ(h->slot_stride % kPageBytes, 0u);
  EXPECT_GE(h->index_offset, h->status_offset + 4 * 5);
  EXPECT_EQ(h->index_offset % 8, 0u);
  EXPECT_GE(h->fields[0].offset, h->index_offset + 8 * 5);
  EXPECT_GE(h->fields[1].offset, h->fields[0].offset + h->fields[0].sample_bytes * 5);
  EXPECT_GE(h->fields[2].offset, h->fields[1].offset + 4 * 5);
  EXPECT_GE(h->slot_stride, h->fields[2].offset + h->fields[2].sample_bytes * 5);
  EXPECT_EQ(h->segment_bytes, kHeaderBytes + 3 * h->slot_stride);
}

// No holder of a descriptor can resize the segment under another's
// mapping (the SIGBUS a truncated ring once raised in the producer), and
// nothing of it is left once its object and descriptors are gone.
TEST(SegmentTest, SizeIsSealedAgainstEveryHolder) {
  const std::string prefix = absl::StrCat("stoker-test.", getpid(), ".seal.");
  const std::string label = prefix + "1";
  {
    auto seg = Segment::Create(label, 8192);
    ASSERT_TRUE(seg.ok()) << seg.status();
    auto fd = seg->Share();
    ASSERT_TRUE(fd.ok()) << fd.status();
    EXPECT_EQ(Segment::List(prefix), std::vector<std::string>{label});
    errno = 0;
    EXPECT_EQ(ftruncate(*fd, 0), -1);
    EXPECT_EQ(errno, EPERM);
    EXPECT_EQ(ftruncate(*fd, 1 << 20), -1);
    EXPECT_EQ(errno, EPERM);
    EXPECT_NE(fcntl(*fd, F_ADD_SEALS, F_SEAL_WRITE), 0);  // Sealed seals.
    struct stat st;
    ASSERT_EQ(fstat(*fd, &st), 0);
    EXPECT_EQ(st.st_size, 8192);
    auto other = Segment::Map(*fd, label);  // As the client maps it.
    close(*fd);
    ASSERT_TRUE(other.ok()) << other.status();
    static_cast<char*>(other->base())[8191] = 7;  // Every page still there.
    EXPECT_EQ(static_cast<char*>(seg->base())[8191], 7);
    EXPECT_EQ(other->Share().status().code(), absl::StatusCode::kFailedPrecondition);
  }
  EXPECT_TRUE(Segment::List(prefix).empty());
  EXPECT_EQ(Segment::Create("a/b", 8192).status().code(), absl::StatusCode::kInvalidArgument);
}

// A segment whose consumer is gone gives its pages back however many still
// hold it: they read zeros, and the file holds no blocks.
TEST(SegmentTest, DiscardGivesThePagesBack) {
  auto seg = Segment::Create(absl::StrCat("stoker-test.", getpid(), ".discard"), 1 << 20);
  ASSERT_TRUE(seg.ok()) << seg.status();
  std::memset(seg->base(), 'x', 1 << 20);
  auto fd = seg->Share();
  ASSERT_TRUE(fd.ok());
  auto other = Segment::Map(*fd, "holder");  // A holder that stays.
  ASSERT_TRUE(other.ok());
  struct stat st;
  ASSERT_EQ(fstat(*fd, &st), 0);
  EXPECT_GE(st.st_blocks * 512, 1 << 20);
  seg->Discard();
  ASSERT_EQ(fstat(*fd, &st), 0);
  EXPECT_EQ(st.st_blocks, 0);
  EXPECT_EQ(st.st_size, 1 << 20);
  EXPECT_EQ(static_cast<char*>(other->base())[4096], 0);
  close(*fd);
}

// What a client maps must be sealed: a plain file or an unsealed memory
// file could shrink under it.
TEST(SegmentTest, MapRefusesAnUnsealedFile) {
  int loose = memfd_create("stoker-test-loose", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(loose, 0);
  ASSERT_EQ(ftruncate(loose, 8192), 0);
  EXPECT_EQ(Segment::Map(loose, "loose").status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(fcntl(loose, F_ADD_SEALS, F_SEAL_SHRINK), 0);  // Growing is still open.
  EXPECT_EQ(Segment::Map(loose, "loose").status().code(),
            absl::StatusCode::kFailedPrecondition);
  close(loose);
  char path[] = "/tmp/stoker-segment-XXXXXX";
  int file = mkstemp(path);
  ASSERT_GE(file, 0);
  unlink(path);
  ASSERT_EQ(ftruncate(file, 8192), 0);
  EXPECT_EQ(Segment::Map(file, "file").status().code(),
            absl::StatusCode::kFailedPrecondition);
  close(file);
}

TEST(RingTest, DeliversInSequenceOrderWhateverThePublishOrder) {
  std::string name = TestName("order");
  auto p = RingProducer::Create(name, SmallGeometry(4), 42, 1);
  ASSERT_TRUE(p.ok()) << p.status();
  auto c = ConsumerOf(**p, 42);
  ASSERT_TRUE(c.ok()) << c.status();
  auto never = [] { return false; };
  int s0 = (*p)->Claim(never);
  int s1 = (*p)->Claim(never);
  ASSERT_NE(s0, s1);
  FillPattern((*p)->Slot(s1), (*p)->layout(), 1);
  (*p)->Publish(s1, 1, 0, 1, 4, 0);
  // Batch 0 is not published yet: waiting for it times out.
  EXPECT_EQ((*c)->Acquire(0, absl::Milliseconds(30), nullptr).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  FillPattern((*p)->Slot(s0), (*p)->layout(), 0);
  (*p)->Publish(s0, 0, 0, 0, 4, 0);
  EXPECT_EQ((*p)->FilledSlots(), 2u);
  auto got0 = (*c)->Acquire(0, absl::Seconds(1), nullptr);
  ASSERT_TRUE(got0.ok()) << got0.status();
  EXPECT_EQ(*got0, s0);
  EXPECT_EQ(CountMismatches((*c)->Slot(*got0), (*c)->layout(), 0), 0);
  auto got1 = (*c)->Acquire(1, absl::Seconds(1), nullptr);
  ASSERT_TRUE(got1.ok());
  EXPECT_EQ(*got1, s1);
  EXPECT_EQ((*c)->Slot(*got1).control->batch_index, 1u);
  (*c)->Release(*got0);
  (*c)->Release(*got1);
  EXPECT_EQ((*p)->FilledSlots(), 0u);
}

TEST(RingTest, APassEndsAtALaterEpochsBatchWithoutTakingIt) {
  // A streamed opening: the epoch's size comes with the ring, later.
  auto p = RingProducer::Create(TestName("epochs"), SmallGeometry(4), 7, 1);
  ASSERT_TRUE(p.ok()) << p.status();
  auto c = ConsumerOf(**p, 7);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->batches_per_epoch(), 0u);
  auto none = [] { return absl::OkStatus(); };
  EXPECT_EQ((*c)->WaitBatchesPerEpoch(absl::Milliseconds(20), none).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  const int s0 = (*p)->Claim([] { return false; });
  (*p)->Publish(s0, 0, 0, 0, 4, 0);  // Epoch 0, batch 0: the epoch's last.
  (*p)->SetBatchesPerEpoch(1);
  const int s1 = (*p)->Claim([] { return false; });
  (*p)->Publish(s1, 1, 1, 0, 4, 0);  // Epoch 1, batch 0.
  auto w = (*c)->WaitBatchesPerEpoch(absl::Seconds(5), none);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(*w, 1u);
  auto got = (*c)->Acquire(0, absl::Seconds(1), nullptr, nullptr, /*last_epoch=*/0);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, s0);
  auto next = (*c)->Acquire(1, absl::Seconds(1), nullptr, nullptr, /*last_epoch=*/0);
  EXPECT_EQ(next.status().code(), absl::StatusCode::kOutOfRange) << next.status();
  EXPECT_EQ((*p)->FilledSlots(), 2u);  // Still there for the next pass.
  auto later = (*c)->Acquire(1, absl::Seconds(1), nullptr, nullptr, /*last_epoch=*/1);
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(*later, s1);
  // A ring closed before the size was known says so.
  auto q = RingProducer::Create(TestName("epochs2"), SmallGeometry(2), 8, 1);
  ASSERT_TRUE(q.ok());
  auto d = ConsumerOf(**q, 8);
  ASSERT_TRUE(d.ok());
  (*q)->Close(kClosedByError);
  EXPECT_EQ((*d)->WaitBatchesPerEpoch(absl::Seconds(5), none).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(RingTest, WrongSessionIdIsRefused) {
  std::string name = TestName("sid");
  auto p = RingProducer::Create(name, SmallGeometry(2), 5, 1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(ConsumerOf(**p, 6).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(RingTest, CloseWakesWaitingConsumer) {
  std::string name = TestName("close");
  auto p = RingProducer::Create(name, SmallGeometry(2), 1, 1);
  ASSERT_TRUE(p.ok());
  auto c = ConsumerOf(**p, 1);
  ASSERT_TRUE(c.ok());
  std::thread closer([&] {
    absl::SleepFor(absl::Milliseconds(50));
    (*p)->Close(kClosedByShutdown);
  });
  auto r = (*c)->Acquire(0, absl::Seconds(30), nullptr);
  closer.join();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("shutting down"), std::string::npos);
}

// Publishes batches 0 and 1 of a 2-slot ring and has the consumer hold
// both; their slots.
std::vector<int> HoldBoth(RingProducer& p, RingConsumer& c) {
  std::vector<int> held;
  for (uint64_t seq = 0; seq < 2; ++seq) {
    int s = p.Claim([] { return false; });
    p.Publish(s, seq, 0, seq, 4, 0);
    absl::StatusOr<int> got = c.Acquire(seq, absl::Seconds(1), nullptr);
    EXPECT_TRUE(got.ok()) << got.status();
    held.push_back(got.ok() ? *got : -1);
  }
  return held;
}

TEST(RingTest, AllSlotsHeldIsAnErrorNotAHangAndTheProducerWorksMeanwhile) {
  std::string name = TestName("held");
  auto p = RingProducer::Create(name, SmallGeometry(2), 1, 1);
  ASSERT_TRUE(p.ok());
  auto c = ConsumerOf(**p, 1);
  ASSERT_TRUE(c.ok());
  const std::vector<int> held = HoldBoth(**p, **c);
  // The producer cannot claim anything while both slots are held.
  int tries = 0;
  EXPECT_EQ((*p)->Claim([&] { return ++tries > 2; }), -1);
  EXPECT_EQ((*c)->Acquire(2, absl::Seconds(5), nullptr).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Meanwhile the producer may work elsewhere: once the consumer released
  // nothing for a whole wait, `idle` runs before each further wait, and
  // the claim looks again after each piece of work, so a slot released
  // meanwhile is claimed without waiting.
  int work = 0;
  const int claimed = (*p)->Claim([] { return false; }, [&] {
    if (++work == 3) (*c)->Release(held[1]);  // The third piece of work frees one.
    return true;
  });
  EXPECT_EQ(claimed, held[1]);
  EXPECT_EQ(work, 3);
  // Without work to do it waits as before (and gives up when told).
  tries = 0;
  EXPECT_EQ((*p)->Claim([&] { return ++tries > 2; }, [] { return false; }), -1);
}

TEST(RingTest, ExtraLivenessErrorIsReturned) {
  std::string name = TestName("live");
  auto p = RingProducer::Create(name, SmallGeometry(2), 1, 1);
  auto c = ConsumerOf(**p, 1);
  ASSERT_TRUE(c.ok());
  auto r = (*c)->Acquire(0, absl::Seconds(5), [] {
    return absl::UnavailableError("control stream ended");
  });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message(), "control stream ended");
}

// A producer process that dies without closing is noticed by pid.
TEST(RingTest, DeadProducerProcessIsDetected) {
  std::string name = TestName("dead");
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto p = RingProducer::Create(name, SmallGeometry(2), 3, 1);
    absl::StatusOr<int> fd = p.ok() ? (*p)->Share() : p.status();
    if (fd.ok()) (void)SendWithFd(pair[1], "ring\n", *fd);
    _exit(0);  // No destructor, no close: as after a crash.
  }
  close(pair[1]);
  std::string message;
  int fd = -1;
  ASSERT_TRUE(ReceiveWithFd(pair[0], 16, &message, &fd).ok());
  ASSERT_GE(fd, 0);
  int wstatus;
  waitpid(child, &wstatus, 0);
  auto c = RingConsumer::Open(fd, name, 3);
  close(fd);
  ASSERT_TRUE(c.ok()) << c.status();
  absl::Time start = absl::Now();
  auto r = (*c)->Acquire(0, absl::Seconds(30), nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("exited"), std::string::npos);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  close(pair[0]);
}

// The producer never reads its geometry back from shared memory, and the
// words the consumer writes reach it only as bounded hints: a consumer that
// overwrites every header word, one at a time and all at once, moves none
// of the producer's views and gets no value past its bound.
TEST(ProducerTest, IgnoresWhatTheConsumerWritesIntoTheHeader) {
  const std::string name = TestName("scribble");
  auto p = RingProducer::Create(name, SmallGeometry(3), 8, 1);
  ASSERT_TRUE(p.ok()) << p.status();
  auto shared = MapShared(**p);
  ASSERT_TRUE(shared.ok()) << shared.status();
  auto* words = static_cast<uint64_t*>(shared->base());
  const RingLayout good = (*p)->layout();
  std::vector<SlotView> views;
  for (int i = 0; i < 3; ++i) views.push_back((*p)->Slot(i));
  uint64_t published = 0;
  auto check = [&](const std::string& what) {
    EXPECT_EQ(std::memcmp(&(*p)->layout(), &good, sizeof(good)), 0) << what;
    for (int i = 0; i < 3; ++i) {
      const SlotView v = (*p)->Slot(i);
      EXPECT_EQ(v.control, views[i].control) << what;
      EXPECT_EQ(v.fields[0], views[i].fields[0]) << what;
      EXPECT_EQ(v.fields[1], views[i].fields[1]) << what;
      EXPECT_EQ(v.status, views[i].status) << what;
    }
    EXPECT_LE((*p)->ConsumerShare(), kShareOne) << what;
    EXPECT_LE((*p)->ConsumerBatches(), published) << what;
    EXPECT_LT((*p)->ConsumerWaitNs(), 3600ULL * 1'000'000'000) << what;
    // Claim, fill within the private geometry, publish, free again.
    const int s = (*p)->Claim([] { return true; });
    if (s >= 0) {
      FillPattern((*p)->Slot(s), good, published);
      (*p)->Publish(s, published++, 0, 0, 4, 0);
      (*p)->Slot(s).control->state.store(kSlotFree);
    }
  };
  for (size_t w = 0; w < sizeof(RingHeader) / 8; ++w) {
    for (uint64_t value : {~0ULL, 0ULL, 0x8000000000000000ULL, 4096ULL}) {
      const uint64_t saved = words[w];
      words[w] = value;
      check(absl::StrCat("word ", w, " = ", value));
      words[w] = saved;
    }
  }
  std::memset(words, 0xa5, sizeof(RingHeader));
  check("every word");
  EXPECT_GT(published, 0u);
}

// Two real processes exchange 100,000 batches through a small ring; the
// consumer checks every byte and label and the order.
TEST(RingTest, TwoProcessesExchange100kSlots) {
  constexpr uint64_t kBatches = 100000;
  std::string name = TestName("xproc");
  auto p = RingProducer::Create(name, SmallGeometry(8), 9, 1);
  ASSERT_TRUE(p.ok()) << p.status();
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto c = ConsumerOf(**p, 9);
    if (!c.ok()) _exit(2);
    uint64_t bad = 0;
    for (uint64_t seq = 0; seq < kBatches; ++seq) {
      auto s = (*c)->Acquire(seq, absl::Seconds(20), nullptr);
      if (!s.ok()) _exit(3);
      const SlotView v = (*c)->Slot(*s);
      if (v.control->sequence.load() != seq || v.control->epoch != seq / 1000)
        ++bad;
      bad += CountMismatches(v, (*c)->layout(), seq);
      (*c)->CountBatch();
      (*c)->Release(*s);
    }
    _exit(bad == 0 ? 0 : 4);
  }
  for (uint64_t seq = 0; seq < kBatches; ++seq) {
    int s = (*p)->Claim([] { return false; });
    ASSERT_GE(s, 0);
    FillPattern((*p)->Slot(s), (*p)->layout(), seq);
    (*p)->Publish(s, seq, seq / 1000, seq % 1000, 4, 0);
  }
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFEXITED(wstatus));
  EXPECT_EQ(WEXITSTATUS(wstatus), 0);
  EXPECT_EQ((*p)->ConsumerBatches(), kBatches);
  EXPECT_EQ((*p)->FilledSlots(), 0u);
}

}  // namespace
}  // namespace stoker::shm
