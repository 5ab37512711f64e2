#include <cstdlib>
#include <cstring>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "client/cpp/batch_lease.h"
#include "client/cpp/client.h"

namespace stoker {

std::shared_ptr<const Batch::Lease> Batch::Lease::Take(std::shared_ptr<const void> k,
                                                       shm::RingConsumer* r,
                                                       shm::SlabRingReader* slabs, int s,
                                                       const shm::SlotSnapshot& snap) {
  auto lease = std::make_shared<Lease>(std::move(k), r, slabs, s, snap);
  const shm::RingLayout& l = r->layout();
  if (r->held() < l.slot_count) return lease;
  void* memory = nullptr;
  if (posix_memalign(&memory, 4096, l.slot_stride) != 0) return lease;
  lease->copy.reset(static_cast<uint8_t*>(memory), std::free);
  // The layout was validated against the mapping, and the counts against
  // the batch size (RingConsumer::Open, Acquire): every range fits.
  const shm::SlotView from = lease->view;
  uint8_t* to = lease->copy.get();
  const uint64_t n = snap.sample_count;
  lease->view = shm::SlotView{nullptr, reinterpret_cast<uint32_t*>(to + l.status_offset),
                              reinterpret_cast<uint64_t*>(to + l.index_offset), {}};
  std::memcpy(lease->view.status, from.status, n * sizeof(uint32_t));
  std::memcpy(lease->view.indices, from.indices, n * sizeof(uint64_t));
  for (uint32_t f = 0; f < l.field_count; ++f) {
    lease->view.fields[f] = to + l.fields[f].offset;
    std::memcpy(lease->view.fields[f], from.fields[f], n * l.fields[f].sample_bytes);
  }
  lease->Return();
  lease->slot = -1;
  lease->slabs = nullptr;
  return lease;
}

std::string Batch::Lease::CopyWarning(uint64_t session_id, const shm::RingConsumer& ring) {
  const uint32_t slots = ring.layout().slot_count;
  return absl::StrCat("stoker: session ", session_id, ": the application holds ", slots - 1,
                      " of its ", slots, " ring slots; a batch taken then is copied out of the "
                      "ring (a copy per batch). Let batches go sooner (a loop holds the batch "
                      "it took last while it takes the next), or open the session with more "
                      "ring slots.");
}

int Batch::field_count() const {
  return static_cast<int>(lease_->layout().field_count);
}

BatchField Batch::field(int i) const {
  const shm::FieldLayout& f = lease_->layout().fields[i];
  BatchField out;
  out.name = std::string_view(f.name, strnlen(f.name, shm::kFieldNameBytes));
  out.data = lease_->view.fields[i];
  out.dtype = f.dtype;
  out.shape.assign(f.shape, f.shape + f.ndim);
  out.sample_bytes = f.sample_bytes;
  out.size_bytes = f.sample_bytes * samples();
  if (lease_->slabs != nullptr) out.slab = lease_->slabs->Field(lease_->slot, i);
  return out;
}

int Batch::FindField(std::string_view name) const {
  for (int i = 0; i < field_count(); ++i) {
    if (field(i).name == name) return i;
  }
  return -1;
}

const uint8_t* Batch::data() const { return lease_->view.fields[0]; }
uint64_t Batch::size_bytes() const { return sample_bytes() * samples(); }
uint32_t Batch::samples() const { return lease_->snapshot.sample_count; }
uint32_t Batch::dtype() const { return lease_->layout().fields[0].dtype; }
uint64_t Batch::sample_bytes() const {
  return lease_->layout().fields[0].sample_bytes;
}
const int32_t* Batch::labels() const {
  const int f = FindField("label");
  return f >= 0 && lease_->layout().fields[f].dtype == shm::kDTypeInt32 &&
                 lease_->layout().fields[f].ndim == 0
             ? reinterpret_cast<const int32_t*>(lease_->view.fields[f])
             : nullptr;
}
const uint32_t* Batch::status() const { return lease_->view.status; }
const uint64_t* Batch::indices() const { return lease_->view.indices; }
uint32_t Batch::error_count() const { return lease_->snapshot.error_count; }
uint64_t Batch::epoch() const { return lease_->snapshot.epoch; }
uint64_t Batch::batch_index() const { return lease_->snapshot.batch_index; }
uint64_t Batch::sequence() const { return lease_->snapshot.sequence; }
const void* Batch::mapping_base() const { return lease_->ring->base(); }
uint64_t Batch::mapping_size() const { return lease_->ring->size(); }
bool Batch::copied() const { return lease_->copy != nullptr; }

}  // namespace stoker
