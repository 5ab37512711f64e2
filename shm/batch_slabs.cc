#include "shm/batch_slabs.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "shm/futex.h"

namespace stoker::shm {
namespace {

class HostSlab : public Slab {
 public:
  explicit HostSlab(Segment segment) : segment_(std::move(segment)) {}
  uint64_t bytes() const override { return segment_.size(); }
  void* data() const override { return segment_.base(); }
  absl::StatusOr<int> Export() const override { return segment_.Share(); }
  void Discard() override { segment_.Discard(); }
  void Handed() override { segment_.CloseDescriptor(); }

 protected:
  absl::Status CopyIn(uint64_t offset, const void* from, uint64_t n) const override {
    std::memcpy(static_cast<char*>(data()) + offset, from, n);
    return absl::OkStatus();
  }
  absl::Status CopyOut(uint64_t offset, void* to, uint64_t n) const override {
    std::memcpy(to, static_cast<const char*>(data()) + offset, n);
    return absl::OkStatus();
  }

 private:
  Segment segment_;
};

class HostMemory : public SlabMemory {
 public:
  std::string kind() const override { return "host"; }
  uint64_t Footprint(uint64_t bytes) const override { return (bytes + 4095) / 4096 * 4096; }

  absl::StatusOr<std::unique_ptr<Slab>> Create(uint64_t bytes) override {
    if (bytes == 0) return absl::InvalidArgumentError("a slab of 0 bytes");
    absl::StatusOr<Segment> segment = Segment::Create("stoker-slab", bytes);
    if (!segment.ok()) return segment.status();
    return std::make_unique<HostSlab>(*std::move(segment));
  }

  absl::StatusOr<std::unique_ptr<Slab>> Import(int fd, uint64_t bytes) override {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      return absl::FailedPreconditionError("the slab's descriptor is not a memory file");
    }
    if (static_cast<uint64_t>(st.st_size) != bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("the slab is ", st.st_size, " bytes where ", bytes, " were due"));
    }
    absl::StatusOr<Segment> segment = Segment::Map(fd, "stoker-slab");
    if (!segment.ok()) return segment.status();
    if (segment->size() != bytes) {  // Sealed now: its size for good.
      return absl::InvalidArgumentError(
          absl::StrCat("the slab is ", segment->size(), " bytes where ", bytes, " were due"));
    }
    return std::make_unique<HostSlab>(*std::move(segment));
  }
};

constexpr uint32_t kMaxSlabs = 65536;

}  // namespace

// OUT_OF_RANGE unless [offset, offset + n) lies in a slab of `bytes`.
static absl::Status InSlab(uint64_t bytes, uint64_t offset, uint64_t n) {
  if (offset <= bytes && n <= bytes - offset) return absl::OkStatus();
  return absl::OutOfRangeError(absl::StrCat(n, " bytes at ", offset, " of a slab of ", bytes));
}

absl::Status Slab::Write(uint64_t offset, const void* from, uint64_t n) const {
  if (absl::Status s = InSlab(bytes(), offset, n); !s.ok()) return s;
  return CopyIn(offset, from, n);
}

absl::Status Slab::Read(uint64_t offset, void* to, uint64_t n) const {
  if (absl::Status s = InSlab(bytes(), offset, n); !s.ok()) return s;
  return CopyOut(offset, to, n);
}

std::unique_ptr<SlabMemory> HostSlabMemory() { return std::make_unique<HostMemory>(); }

absl::StatusOr<SlabFences> SlabFences::Create(uint32_t slabs) {
  if (slabs == 0 || slabs > kMaxSlabs) {
    return absl::InvalidArgumentError(absl::StrCat(slabs, " slabs: 1..", kMaxSlabs));
  }
  absl::StatusOr<Segment> page = Segment::Create("stoker-fences", uint64_t{4} * slabs);
  if (!page.ok()) return page.status();
  return SlabFences(*std::move(page), slabs);  // A new segment is zeros.
}

absl::StatusOr<SlabFences> SlabFences::Map(int fd, uint32_t slabs) {
  if (slabs == 0 || slabs > kMaxSlabs) {
    return absl::InvalidArgumentError(absl::StrCat(slabs, " slabs: 1..", kMaxSlabs));
  }
  absl::StatusOr<Segment> page = Segment::Map(fd, "stoker-fences");
  if (!page.ok()) return page.status();
  if (page->size() < uint64_t{4} * slabs) {
    return absl::InvalidArgumentError(absl::StrCat("the fences' page holds ", page->size() / 4,
                                                   " counts where ", slabs, " were due"));
  }
  return SlabFences(*std::move(page), slabs);
}

std::atomic<uint32_t>* SlabFences::Word(uint32_t slab) const {
  return static_cast<std::atomic<uint32_t>*>(segment_.base()) + slab;
}

void SlabFences::Set(uint32_t slab, uint32_t value) const {
  if (slab >= slabs_) return;
  Word(slab)->store(value, std::memory_order_release);
  FutexWakeAll(Word(slab));
}

absl::Status SlabFences::Await(uint32_t slab, uint32_t before, uint32_t due, const char* what,
                               absl::Time deadline, const std::atomic<bool>* cancel) const {
  if (slab >= slabs_) {
    return absl::InvalidArgumentError(absl::StrCat("slab ", slab, " of ", slabs_));
  }
  std::atomic<uint32_t>* word = Word(slab);
  for (;;) {
    const uint32_t now = word->load(std::memory_order_acquire);
    if (now == due) return absl::OkStatus();
    if (now != before) {
      return absl::FailedPreconditionError(absl::StrCat(
          "slab ", slab, "'s fence holds ", now, " where ",
          before == due ? absl::StrCat(due) : absl::StrCat(before, " or ", due), " was due (",
          what, "): the other side broke the protocol"));
    }
    if (cancel != nullptr && cancel->load(std::memory_order_acquire)) {
      return absl::CancelledError(absl::StrCat("waiting for slab ", slab, " (", what, ")"));
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("slab ", slab, ": ", what, " did not come by the deadline"));
    }
    FutexWait(word, now, cancel != nullptr ? std::min(left, kCancelPoll) : left);
  }
}

// Batch k's counts: 2k+1 written, 2k+2 released (modulo 2^32).
absl::Status SlabFences::AwaitWritable(uint32_t slab, uint64_t batch, absl::Time deadline,
                                       const std::atomic<bool>* cancel) const {
  const uint32_t due = static_cast<uint32_t>(2 * batch);
  // Batch 0 waits for nothing: the count can only be 0.
  return Await(slab, batch == 0 ? due : due - 1, due, "the trainer's release", deadline,
               cancel);
}

void SlabFences::Written(uint32_t slab, uint64_t batch) const {
  Set(slab, static_cast<uint32_t>(2 * batch + 1));
}

absl::Status SlabFences::AwaitReadable(uint32_t slab, uint64_t batch, absl::Time deadline,
                                       const std::atomic<bool>* cancel) const {
  const uint32_t due = static_cast<uint32_t>(2 * batch + 1);
  return Await(slab, due - 1, due, "the daemon's batch", deadline, cancel);
}

void SlabFences::Released(uint32_t slab, uint64_t batch) const {
  Set(slab, static_cast<uint32_t>(2 * batch + 2));
}

}  // namespace stoker::shm
