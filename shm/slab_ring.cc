#include "shm/slab_ring.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace stoker::shm {

uint64_t SlabBytes(const RingLayout& layout) {
  return layout.slot_stride - layout.fields[0].offset;
}

SlabRing::SlabRing(const RingLayout& layout, std::vector<std::unique_ptr<Slab>> slabs,
                   SlabFences fences)
    : layout_(layout),
      slabs_(std::move(slabs)),
      fences_(std::move(fences)),
      uses_(new std::atomic<uint64_t>[slabs_.size()]) {
  for (size_t s = 0; s < slabs_.size(); ++s) uses_[s].store(0, std::memory_order_relaxed);
}

void* SlabRing::Field(uint32_t slot, uint32_t f) const {
  if (slot >= slots() || f >= layout_.field_count) return nullptr;
  return static_cast<uint8_t*>(slabs_[slot]->data()) +
         (layout_.fields[f].offset - layout_.fields[0].offset);
}

absl::StatusOr<std::unique_ptr<SlabRingWriter>> SlabRingWriter::Create(
    SlabMemory* memory, const RingLayout& layout) {
  absl::StatusOr<SlabFences> fences = SlabFences::Create(layout.slot_count);
  if (!fences.ok()) return fences.status();
  std::vector<std::unique_ptr<Slab>> slabs;
  for (uint32_t s = 0; s < layout.slot_count; ++s) {
    absl::StatusOr<std::unique_ptr<Slab>> slab = memory->Create(SlabBytes(layout));
    if (!slab.ok()) return slab.status();
    slabs.push_back(*std::move(slab));
  }
  return std::unique_ptr<SlabRingWriter>(
      new SlabRingWriter(layout, std::move(slabs), *std::move(fences)));
}

absl::StatusOr<std::vector<int>> SlabRingWriter::HandOver() {
  if (handed_) return absl::FailedPreconditionError("the slabs were handed over already");
  std::vector<int> fds;
  absl::StatusOr<int> fd = fences_.Share();
  for (size_t i = 0; fd.ok() && i < slabs_.size(); ++i) {
    fds.push_back(*fd);
    fd = slabs_[i]->Export();
  }
  if (!fd.ok()) {
    for (int f : fds) close(f);
    return fd.status();
  }
  fds.push_back(*fd);
  handed_ = true;
  fences_.Handed();
  for (std::unique_ptr<Slab>& slab : slabs_) slab->Handed();
  return fds;
}

absl::Status SlabRingWriter::AwaitWritable(uint32_t slot, absl::Time deadline,
                                           const std::atomic<bool>* cancel) const {
  if (slot >= slots()) return absl::InvalidArgumentError(absl::StrCat("no slab ", slot));
  return fences_.AwaitWritable(slot, Uses(slot), deadline, cancel);
}

absl::Status SlabRingWriter::Deliver(uint32_t slot, const SlotView& view) {
  if (slot >= slots()) return absl::InvalidArgumentError(absl::StrCat("no slab ", slot));
  if (absl::Status s = slabs_[slot]->Write(0, view.fields[0], SlabBytes(layout_)); !s.ok()) {
    return s;
  }
  fences_.Written(slot, Uses(slot));
  Used(slot);
  return absl::OkStatus();
}

void SlabRingWriter::Discard() {
  for (std::unique_ptr<Slab>& slab : slabs_) slab->Discard();
}

absl::StatusOr<std::unique_ptr<SlabRingReader>> SlabRingReader::Import(
    SlabMemory* memory, const RingLayout& layout, const std::vector<int>& fds) {
  if (fds.size() != size_t{layout.slot_count} + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a ring of ", layout.slot_count, " slots takes ", layout.slot_count + 1,
        " descriptors (fences, slabs), not ", fds.size()));
  }
  absl::StatusOr<SlabFences> fences = SlabFences::Map(fds[0], layout.slot_count);
  if (!fences.ok()) return fences.status();
  std::vector<std::unique_ptr<Slab>> slabs;
  for (uint32_t s = 0; s < layout.slot_count; ++s) {
    absl::StatusOr<std::unique_ptr<Slab>> slab = memory->Import(fds[s + 1], SlabBytes(layout));
    if (!slab.ok()) return slab.status();
    slabs.push_back(*std::move(slab));
  }
  return std::unique_ptr<SlabRingReader>(
      new SlabRingReader(layout, std::move(slabs), *std::move(fences)));
}

absl::Status SlabRingReader::Await(uint32_t slot, absl::Time deadline,
                                   const std::atomic<bool>* cancel) const {
  if (slot >= slots()) return absl::InvalidArgumentError(absl::StrCat("no slab ", slot));
  return fences_.AwaitReadable(slot, Uses(slot), deadline, cancel);
}

void SlabRingReader::Release(uint32_t slot) {
  if (slot >= slots()) return;
  fences_.Released(slot, Uses(slot));
  Used(slot);
}

}  // namespace stoker::shm
