// A ring's batches through its slabs, for every kind of slab (the cuda
// kind is skipped without a GPU, saying why): every byte of every field
// arrives, a trainer that keeps a slab holds only its own ring, and the
// trainer's side takes only the descriptors the daemon's gives.
#include "shm/slab_ring.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "shm/cuda_slabs.h"

namespace stoker::shm {
namespace {

// Byte i of field f of batch `sequence`, so that a byte from another
// batch, field or place shows.
uint8_t Byte(uint64_t sequence, uint32_t f, uint64_t i) {
  return static_cast<uint8_t>(sequence * 131 + f * 31 + i * 7 + (i >> 8));
}

class SlabRingTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<SlabMemory>> memory = SlabMemoryOfKind(GetParam());
    if (!memory.ok()) GTEST_SKIP() << GetParam() << " slabs: " << memory.status();
    memory_ = *std::move(memory);
    auto producer = RingProducer::Create(
        absl::StrCat("stoker-test.", getpid(), ".slab-ring"),
        ImageLabelGeometry(kSlots, 8, 24, 20, 3, kDTypeUint8), 7, 1);
    ASSERT_TRUE(producer.ok()) << producer.status();
    producer_ = *std::move(producer);
    auto writer = SlabRingWriter::Create(memory_.get(), producer_->layout());
    ASSERT_TRUE(writer.ok()) << writer.status();
    writer_ = *std::move(writer);
    absl::StatusOr<int> ring_fd = producer_->Share();
    ASSERT_TRUE(ring_fd.ok());
    auto consumer = RingConsumer::Open(*ring_fd, producer_->name(), 7);
    close(*ring_fd);
    ASSERT_TRUE(consumer.ok()) << consumer.status();
    consumer_ = *std::move(consumer);
    absl::StatusOr<std::vector<int>> fds = writer_->HandOver();
    ASSERT_TRUE(fds.ok()) << fds.status();
    fds_ = *fds;
    auto reader = SlabRingReader::Import(memory_.get(), consumer_->layout(), fds_);
    ASSERT_TRUE(reader.ok()) << reader.status();
    reader_ = *std::move(reader);
  }
  void TearDown() override {
    for (int fd : fds_) close(fd);
  }

  // The daemon's side of batch `sequence`: claim, await the slab, fill,
  // deliver, publish. The slot, or -1 with a test failure.
  int Produce(uint64_t sequence) {
    const int slot = producer_->Claim([] { return false; });
    absl::Status s = writer_->AwaitWritable(slot, absl::Now() + absl::Seconds(20));
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) return -1;
    const SlotView view = producer_->Slot(slot);
    const RingLayout& layout = producer_->layout();
    for (uint32_t f = 0; f < layout.field_count; ++f) {
      const uint64_t n = uint64_t{layout.batch_size} * layout.fields[f].sample_bytes;
      for (uint64_t i = 0; i < n; ++i) view.fields[f][i] = Byte(sequence, f, i);
    }
    s = writer_->Deliver(slot, view);
    EXPECT_TRUE(s.ok()) << s;
    producer_->Publish(slot, sequence, 0, sequence, layout.batch_size, 0);
    return slot;
  }

  // Bytes of batch `sequence`'s fields in `slot`'s slab that are not its.
  uint64_t Mismatches(uint32_t slot, uint64_t sequence) const {
    const RingLayout& layout = consumer_->layout();
    uint64_t bad = 0;
    for (uint32_t f = 0; f < layout.field_count; ++f) {
      std::vector<uint8_t> got(uint64_t{layout.batch_size} * layout.fields[f].sample_bytes);
      const uint64_t at = layout.fields[f].offset - layout.fields[0].offset;
      if (!reader_->slab(slot).Read(at, got.data(), got.size()).ok()) return ~0ull;
      for (uint64_t i = 0; i < got.size(); ++i) bad += got[i] != Byte(sequence, f, i);
    }
    return bad;
  }

  static constexpr uint32_t kSlots = 4;
  std::unique_ptr<SlabMemory> memory_;
  std::unique_ptr<RingProducer> producer_;
  std::unique_ptr<RingConsumer> consumer_;
  std::unique_ptr<SlabRingWriter> writer_;
  std::unique_ptr<SlabRingReader> reader_;
  std::vector<int> fds_;
};

TEST_P(SlabRingTest, EveryBatchArrivesWholeInItsSlotsSlab) {
  constexpr uint64_t kBatches = 2000;
  std::thread daemon([&] {
    for (uint64_t seq = 0; seq < kBatches; ++seq) {
      if (Produce(seq) < 0) return;
    }
  });
  uint64_t corrupted = 0, batches = 0;
  for (uint64_t seq = 0; seq < kBatches; ++seq) {
    absl::StatusOr<int> slot = consumer_->Acquire(seq, absl::Seconds(20), nullptr);
    ASSERT_TRUE(slot.ok()) << slot.status();
    ASSERT_TRUE(reader_->Await(*slot, absl::Now() + absl::Seconds(20)).ok());
    corrupted += Mismatches(*slot, seq) != 0;
    ++batches;
    reader_->Release(*slot);
    consumer_->Release(*slot);
  }
  daemon.join();
  EXPECT_EQ(batches, kBatches);
  EXPECT_EQ(corrupted, 0u);
  // Each slab's fence counts two per batch it carried.
  uint64_t counted = 0;
  for (uint32_t s = 0; s < kSlots; ++s) counted += reader_->fences().Count(s);
  EXPECT_EQ(counted, 2 * kBatches);
}

TEST_P(SlabRingTest, FieldsAreWhereTheRingLaysThemOut) {
  const RingLayout& layout = consumer_->layout();
  EXPECT_EQ(SlabBytes(layout), layout.slot_stride - layout.fields[0].offset);
  for (uint32_t s = 0; s < kSlots; ++s) {
    EXPECT_EQ(reader_->slab(s).bytes(), SlabBytes(layout));
    EXPECT_EQ(reader_->Field(s, 0), reader_->slab(s).data());
    EXPECT_EQ(static_cast<uint8_t*>(reader_->Field(s, 1)) -
                  static_cast<uint8_t*>(reader_->Field(s, 0)),
              static_cast<ptrdiff_t>(layout.fields[1].offset - layout.fields[0].offset));
  }
}

// A trainer that releases a slot but keeps its slab holds its own ring
// until the daemon's deadline; one that writes a count no batch explains
// is refused at once.
TEST_P(SlabRingTest, ATrainerThatKeepsASlabHoldsOnlyItsOwnRing) {
  const int slot = Produce(0);
  ASSERT_GE(slot, 0);
  absl::StatusOr<int> got = consumer_->Acquire(0, absl::Seconds(20), nullptr);
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(reader_->Await(*got, absl::Now() + absl::Seconds(20)).ok());
  consumer_->Release(*got);  // Not the slab.
  absl::Status s = writer_->AwaitWritable(*got, absl::Now() + absl::Milliseconds(100));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fds_[0], 0);
  ASSERT_NE(page, MAP_FAILED);
  static_cast<volatile uint32_t*>(page)[*got] = 40;  // Batch 19's release.
  s = writer_->AwaitWritable(*got, absl::Now() + absl::Seconds(20));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  munmap(page, 4096);
}

TEST_P(SlabRingTest, TheTrainersSideTakesOnlyWhatTheDaemonGave) {
  std::vector<int> fewer(fds_.begin(), fds_.end() - 1);
  auto r = SlabRingReader::Import(memory_.get(), consumer_->layout(), fewer);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  // A ring whose slots are larger than the slabs.
  RingLayout larger = consumer_->layout();
  larger.slot_stride += 4096;
  r = SlabRingReader::Import(memory_.get(), larger, fds_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  // The fences where a slab belongs.
  std::vector<int> swapped = fds_;
  swapped[1] = fds_[0];
  r = SlabRingReader::Import(memory_.get(), consumer_->layout(), swapped);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(SlabMemoryOfKind("tpu").status().code(), absl::StatusCode::kInvalidArgument);
  // Handed over once: the daemon's side keeps no descriptor to give again.
  EXPECT_EQ(writer_->HandOver().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_P(SlabRingTest, ASlotOutOfRangeIsRefusedNotIndexed) {
  EXPECT_EQ(writer_->AwaitWritable(kSlots, absl::Now()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(writer_->Deliver(kSlots, producer_->Slot(0)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reader_->Await(kSlots, absl::Now()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reader_->Field(kSlots, 0), nullptr);
  EXPECT_EQ(reader_->Field(0, shm::kMaxFields), nullptr);
  reader_->Release(kSlots);
  for (uint32_t s = 0; s < kSlots; ++s) EXPECT_EQ(reader_->fences().Count(s), 0u);
}

// A trainer that is gone keeps no host memory of the daemon's: what it
// still maps reads zeros, though the daemon closed its descriptors when it
// handed them over. (A GPU's memory goes with its last holder.)
TEST_P(SlabRingTest, DiscardedHostSlabsReadZeros) {
  if (GetParam() != "host") GTEST_SKIP() << "host slabs only";
  const int slot = Produce(0);
  ASSERT_GE(slot, 0);
  ASSERT_EQ(Mismatches(slot, 0), 0u);
  EXPECT_EQ(memory_->Footprint(SlabBytes(producer_->layout())) % 4096, 0u);
  writer_->Discard();
  std::vector<uint8_t> got(SlabBytes(consumer_->layout()));
  ASSERT_TRUE(reader_->slab(slot).Read(0, got.data(), got.size()).ok());
  EXPECT_EQ(std::count(got.begin(), got.end(), 0), static_cast<ptrdiff_t>(got.size()));
}

INSTANTIATE_TEST_SUITE_P(Kinds, SlabRingTest, ::testing::Values("host", "cuda"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace stoker::shm
