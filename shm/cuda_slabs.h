// SlabMemory's "cuda" kind: slabs in a GPU's memory through the CUDA
// driver API, loaded at run time (dlopen), so that whoever links this
// builds and runs without CUDA. A slab is a cuMemCreate allocation on the
// device, exportable as a POSIX descriptor (what crosses to the trainer:
// no cudaIpc handle, which does not cross PID namespaces), mapped into this
// process's address space (cuMemAddressReserve, cuMemMap, cuMemSetAccess);
// Import maps a received descriptor the same way. data() is a device
// address; Write and Read are synchronous copies (Write returns once the
// bytes are on the device). Every call runs with the device's primary
// context current; each slab holds a reference on it, so a slab may
// outlive its SlabMemory.
//
// Without a usable GPU it says why, as FAILED_PRECONDITION: the library
// that did not load, a symbol it lacks, or the driver's error by name
// ("cuInit: CUDA_ERROR_NO_DEVICE (100)").
//
// An imported descriptor is checked by mapping `bytes` of it: a smaller
// allocation fails there (INVALID_ARGUMENT); a larger one is mapped only
// in part. Thread-safe.
#ifndef STOKER_SHM_CUDA_SLABS_H_
#define STOKER_SHM_CUDA_SLABS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "shm/batch_slabs.h"

namespace stoker::shm {

// Slabs on GPU `device` (an ordinal), through the driver `library`.
absl::StatusOr<std::unique_ptr<SlabMemory>> CudaSlabMemory(
    int device = 0, const std::string& library = "libcuda.so.1");

// The same on the GPU at PCI address `bus_id` ("0000:3b:00.0"): the one
// GPU whatever each process's CUDA_VISIBLE_DEVICES numbers it.
// INVALID_ARGUMENT when no GPU is there.
absl::StatusOr<std::unique_ptr<SlabMemory>> CudaSlabMemoryOnBus(
    const std::string& bus_id, const std::string& library = "libcuda.so.1");

// Slabs of a kind by its name: "host" (HostSlabMemory) or "cuda" (on the
// GPU at `gpu_bus_id`, or GPU 0 when it is empty); INVALID_ARGUMENT for
// another name.
absl::StatusOr<std::unique_ptr<SlabMemory>> SlabMemoryOfKind(const std::string& kind,
                                                              const std::string& gpu_bus_id = "");

}  // namespace stoker::shm

#endif  // STOKER_SHM_CUDA_SLABS_H_
