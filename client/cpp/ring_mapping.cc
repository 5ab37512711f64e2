#include "client/cpp/ring_mapping.h"

#include <unistd.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "proto/spec_util.h"
#include "shm/cuda_slabs.h"
#include "shm/fd_passing.h"

namespace stoker {

absl::StatusOr<MappedRing> MapRing(const v1::SessionSpec& spec,
                                   const v1::OpenSessionResponse& resp,
                                   const std::string& ring_socket) {
  const v1::RingInfo& info = resp.ring();
  if (info.handoff_socket().empty()) {
    return absl::FailedPreconditionError(
        "the daemon names no ring handoff socket (an older stokerd)");
  }
  auto name = [](absl::string_view path) { return path.substr(path.rfind('/') + 1); };
  const std::string& handoff = name(info.handoff_socket()) == name(ring_socket)
                                   ? ring_socket
                                   : info.handoff_socket();
  MappedRing mapped;
  if (spec.has_slabs()) {
    absl::StatusOr<std::unique_ptr<shm::SlabMemory>> memory =
        shm::SlabMemoryOfKind(SlabKind(spec), SlabGpu(spec));
    if (!memory.ok()) return memory.status();
    mapped.slab_memory = *std::move(memory);
  }
  std::vector<int> slab_fds;
  const size_t slab_count = spec.has_slabs() ? info.slab_descriptors() : 0;
  if (spec.has_slabs() && (slab_count < 3 || slab_count > shm::kMaxRingSlots + 1)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the daemon made ", slab_count, " slab descriptors for a ring of slots",
        slab_count == 0 ? " (a stokerd older than slabs)" : ""));
  }
  absl::StatusOr<int> fd = shm::RequestRingFd(handoff, resp.session_id(), info.handoff_token(),
                                              slab_count, spec.has_slabs() ? &slab_fds : nullptr);
  if (!fd.ok()) return fd.status();
  auto ring = shm::RingConsumer::Open(*fd, info.shm_name(), resp.session_id());
  close(*fd);  // The mapping stays.
  if (!ring.ok()) {
    shm::CloseFds(&slab_fds);
    return ring.status();
  }
  mapped.ring = *std::move(ring);
  if (spec.has_slabs()) {
    auto slabs = shm::SlabRingReader::Import(mapped.slab_memory.get(), mapped.ring->layout(),
                                             slab_fds);
    shm::CloseFds(&slab_fds);  // The mappings stay.
    if (!slabs.ok()) return slabs.status();
    mapped.slabs = *std::move(slabs);
  }
  return mapped;
}

}  // namespace stoker
