// A session's ring as this process maps it, from the descriptor the daemon
// hands over on its ring socket (a sealed memory file with no name
// anywhere), and the session's slabs (SessionSpec.slabs) imported from
// the descriptors that follow it (shm/slab_ring.h). Private to the client
// library.
#ifndef STOKER_CLIENT_CPP_RING_MAPPING_H_
#define STOKER_CLIENT_CPP_RING_MAPPING_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/stoker.pb.h"
#include "shm/batch_slabs.h"
#include "shm/ring.h"
#include "shm/slab_ring.h"

namespace stoker {

struct MappedRing {
  std::unique_ptr<shm::RingConsumer> ring;
  // Null without slabs. The memory outlives the slabs it imported.
  std::unique_ptr<shm::SlabMemory> slab_memory;
  std::unique_ptr<shm::SlabRingReader> slabs;
};

// Maps the ring of session `resp` opened with `spec`. The daemon names
// its handoff socket as it sees it; where that is the ring socket beside
// its control socket, this process reaches it as `ring_socket`, beside the
// socket it connected: a trainer's container may mount the socket folder
// elsewhere. The slabs are imported as `spec` asks (GPU slabs on the GPU
// its placement names): SlabMemoryOfKind's and SlabRingReader::Import's
// errors.
absl::StatusOr<MappedRing> MapRing(const v1::SessionSpec& spec,
                                   const v1::OpenSessionResponse& resp,
                                   const std::string& ring_socket);

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_RING_MAPPING_H_
