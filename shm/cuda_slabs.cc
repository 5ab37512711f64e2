#include "shm/cuda_slabs.h"

#include <dlfcn.h>
#include <fcntl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace stoker::shm {
namespace {

// The driver API's types and constants this unit uses, as cuda.h declares
// them (its ABI is stable: these are the CUDA 10.2+ entry points).
using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUdeviceptr = unsigned long long;
using CUmemHandle = unsigned long long;
struct CUmemLocation {
  int type;
  int id;
};
struct CUmemAllocationProp {
  int type;
  int requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};
static_assert(sizeof(CUmemAllocationProp) == 32, "cuda.h's CUmemAllocationProp_v1");
struct CUmemAccessDesc {
  CUmemLocation location;
  int flags;
};
constexpr int kAllocationPinned = 1;    // CU_MEM_ALLOCATION_TYPE_PINNED
constexpr int kHandlePosixFd = 1;       // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
constexpr int kLocationDevice = 1;      // CU_MEM_LOCATION_TYPE_DEVICE
constexpr int kAccessReadWrite = 3;     // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
constexpr int kGranularityMinimum = 0;  // CU_MEM_ALLOC_GRANULARITY_MINIMUM

// What a slab of `device` is: device memory, exportable as a descriptor.
CUmemAllocationProp DeviceProp(CUdevice device) {
  CUmemAllocationProp prop{};
  prop.type = kAllocationPinned;
  prop.requestedHandleTypes = kHandlePosixFd;
  prop.location = {kLocationDevice, device};
  return prop;
}

// The entry points, resolved once per memory.
struct Driver {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGet)(CUdevice*, int);
  CUresult (*DeviceGetByPCIBusId)(CUdevice*, const char*);
  CUresult (*PrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*PrimaryCtxRelease)(CUdevice);
  CUresult (*CtxPush)(CUcontext);
  CUresult (*CtxPop)(CUcontext*);
  CUresult (*ErrorName)(CUresult, const char**);
  CUresult (*Granularity)(size_t*, const CUmemAllocationProp*, int);
  CUresult (*Create)(CUmemHandle*, size_t, const CUmemAllocationProp*, unsigned long long);
  CUresult (*Release)(CUmemHandle);
  CUresult (*Export)(void*, CUmemHandle, int, unsigned long long);
  CUresult (*Import)(CUmemHandle*, void*, int);
  CUresult (*Reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*Free)(CUdeviceptr, size_t);
  CUresult (*Map)(CUdeviceptr, size_t, size_t, CUmemHandle, unsigned long long);
  CUresult (*Unmap)(CUdeviceptr, size_t);
  CUresult (*SetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t);
  CUresult (*CopyIn)(CUdeviceptr, const void*, size_t);
  CUresult (*CopyOut)(void*, CUdeviceptr, size_t);
  CUresult (*Synchronize)();

  std::string Name(CUresult r) const {
    const char* name = nullptr;
    if (ErrorName(r, &name) != 0 || name == nullptr) name = "CUDA_ERROR";
    return absl::StrCat(name, " (", r, ")");
  }
  absl::Status Check(const char* call, CUresult r,
                     absl::StatusCode code = absl::StatusCode::kFailedPrecondition) const {
    if (r == 0) return absl::OkStatus();
    return absl::Status(code, absl::StrCat(call, ": ", Name(r)));
  }
};

// Resolves every entry point of `library` (kept loaded for the process).
absl::StatusOr<std::shared_ptr<const Driver>> Load(const std::string& library) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA driver (", why != nullptr ? why : library, ")"));
  }
  auto d = std::make_shared<Driver>();
  absl::Status missing;
  auto get = [&](auto* fn, const char* name) {
    *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(lib, name));
    if (*fn == nullptr && missing.ok()) {
      missing = absl::FailedPreconditionError(absl::StrCat(
          library, " lacks ", name, " (a CUDA driver older than 10.2, or not one)"));
    }
  };
  get(&d->Init, "cuInit");
  get(&d->DeviceGet, "cuDeviceGet");
  get(&d->DeviceGetByPCIBusId, "cuDeviceGetByPCIBusId");
  get(&d->PrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  get(&d->PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
  get(&d->CtxPush, "cuCtxPushCurrent_v2");
  get(&d->CtxPop, "cuCtxPopCurrent_v2");
  get(&d->ErrorName, "cuGetErrorName");
  get(&d->Granularity, "cuMemGetAllocationGranularity");
  get(&d->Create, "cuMemCreate");
  get(&d->Release, "cuMemRelease");
  get(&d->Export, "cuMemExportToShareableHandle");
  get(&d->Import, "cuMemImportFromShareableHandle");
  get(&d->Reserve, "cuMemAddressReserve");
  get(&d->Free, "cuMemAddressFree");
  get(&d->Map, "cuMemMap");
  get(&d->Unmap, "cuMemUnmap");
  get(&d->SetAccess, "cuMemSetAccess");
  get(&d->CopyIn, "cuMemcpyHtoD_v2");
  get(&d->CopyOut, "cuMemcpyDtoH_v2");
  get(&d->Synchronize, "cuCtxSynchronize");
  if (!missing.ok()) return missing;
  return std::shared_ptr<const Driver>(std::move(d));
}

// The device's primary context, current on this thread while it lives.
class Current {
 public:
  Current(const Driver& d, CUcontext ctx) : d_(d), pushed_(d.CtxPush(ctx) == 0) {}
  ~Current() {
    CUcontext popped = nullptr;
    if (pushed_) d_.CtxPop(&popped);
  }

 private:
  const Driver& d_;
  const bool pushed_;
};

// A slab holds a reference of its own on the primary context (taken by
// its maker): it may outlive its SlabMemory.
class CudaSlab : public Slab {
 public:
  CudaSlab(std::shared_ptr<const Driver> d, CUdevice device, CUcontext ctx, CUmemHandle handle,
           CUdeviceptr ptr, size_t mapped, uint64_t bytes, bool created)
      : d_(std::move(d)), device_(device), ctx_(ctx), handle_(handle), ptr_(ptr),
        mapped_(mapped), bytes_(bytes), created_(created) {}
  ~CudaSlab() override {
    {
      Current current(*d_, ctx_);
      d_->Unmap(ptr_, mapped_);
      d_->Free(ptr_, mapped_);
      d_->Release(handle_);
    }
    d_->PrimaryCtxRelease(device_);
  }
  uint64_t bytes() const override { return bytes_; }
  void* data() const override { return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr_)); }
  absl::StatusOr<int> Export() const override {
    if (!created_) return absl::FailedPreconditionError("an imported slab is not exported");
    Current current(*d_, ctx_);
    int fd = -1;
    if (absl::Status s = d_->Check("cuMemExportToShareableHandle",
                                   d_->Export(&fd, handle_, kHandlePosixFd, 0));
        !s.ok()) {
      return s;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
  }

 protected:
  absl::Status CopyIn(uint64_t offset, const void* from, uint64_t n) const override {
    Current current(*d_, ctx_);
    // From pageable memory the copy may return before the bytes are on
    // the device: they are, once the context is synchronized.
    absl::Status s = d_->Check("cuMemcpyHtoD", d_->CopyIn(ptr_ + offset, from, n),
                               absl::StatusCode::kInternal);
    if (s.ok()) s = d_->Check("cuCtxSynchronize", d_->Synchronize(), absl::StatusCode::kInternal);
    return s;
  }
  absl::Status CopyOut(uint64_t offset, void* to, uint64_t n) const override {
    Current current(*d_, ctx_);
    return d_->Check("cuMemcpyDtoH", d_->CopyOut(to, ptr_ + offset, n),
                     absl::StatusCode::kInternal);
  }

 private:
  const std::shared_ptr<const Driver> d_;
  const CUdevice device_;
  const CUcontext ctx_;
  const CUmemHandle handle_;
  const CUdeviceptr ptr_;
  const size_t mapped_;
  const uint64_t bytes_;
  const bool created_;
};

class CudaMemory : public SlabMemory {
 public:
  CudaMemory(std::shared_ptr<const Driver> d, CUdevice device, CUcontext ctx, size_t granularity)
      : d_(std::move(d)), device_(device), ctx_(ctx), granularity_(granularity) {}
  ~CudaMemory() override { d_->PrimaryCtxRelease(device_); }

  std::string kind() const override { return "cuda"; }

  absl::StatusOr<std::unique_ptr<Slab>> Create(uint64_t bytes) override {
    if (bytes == 0) return absl::InvalidArgumentError("a slab of 0 bytes");
    Current current(*d_, ctx_);
    const CUmemAllocationProp prop = DeviceProp(device_);
    CUmemHandle handle = 0;
    const size_t size = Rounded(bytes);
    if (size == 0) return absl::InvalidArgumentError(absl::StrCat("a slab of ", bytes, " bytes"));
    if (absl::Status s = d_->Check("cuMemCreate", d_->Create(&handle, size, &prop, 0),
                                   absl::StatusCode::kResourceExhausted);
        !s.ok()) {
      return s;
    }
    return Mapped(handle, size, bytes, /*created=*/true);
  }

  absl::StatusOr<std::unique_ptr<Slab>> Import(int fd, uint64_t bytes) override {
    if (Rounded(bytes) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("a slab of ", bytes, " bytes"));
    }
    Current current(*d_, ctx_);
    CUmemHandle handle = 0;
    if (absl::Status s = d_->Check(
            "cuMemImportFromShareableHandle",
            d_->Import(&handle, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                       kHandlePosixFd));
        !s.ok()) {
      return s;
    }
    return Mapped(handle, Rounded(bytes), bytes, /*created=*/false);
  }

 private:
  // `bytes` in whole granules; 0 past what an address can hold.
  uint64_t Footprint(uint64_t bytes) const override {
    return Rounded(bytes) == 0 ? bytes : Rounded(bytes);
  }
  size_t Rounded(uint64_t bytes) const {
    if (bytes > SIZE_MAX - granularity_) return 0;
    return (bytes + granularity_ - 1) / granularity_ * granularity_;
  }
  // Maps `handle` (released on failure) into this process, read-write.
  absl::StatusOr<std::unique_ptr<Slab>> Mapped(CUmemHandle handle, size_t size, uint64_t bytes,
                                               bool created) {
    CUdeviceptr ptr = 0;
    CUcontext retained = nullptr;  // The slab's own reference.
    absl::Status s =
        d_->Check("cuDevicePrimaryCtxRetain", d_->PrimaryCtxRetain(&retained, device_));
    if (!s.ok()) {
      d_->Release(handle);
      return s;
    }
    s = d_->Check("cuMemAddressReserve", d_->Reserve(&ptr, size, granularity_, 0, 0));
    if (!s.ok()) {
      d_->Release(handle);
      d_->PrimaryCtxRelease(device_);
      return s;
    }
    s = d_->Check("cuMemMap", d_->Map(ptr, size, 0, handle, 0),
                  absl::StatusCode::kInvalidArgument);  // A smaller allocation.
    if (s.ok()) {
      const CUmemAccessDesc access{{kLocationDevice, device_}, kAccessReadWrite};
      s = d_->Check("cuMemSetAccess", d_->SetAccess(ptr, size, &access, 1));
      if (!s.ok()) d_->Unmap(ptr, size);
    }
    if (!s.ok()) {
      d_->Free(ptr, size);
      d_->Release(handle);
      d_->PrimaryCtxRelease(device_);
      return s;
    }
    return std::make_unique<CudaSlab>(d_, device_, ctx_, handle, ptr, size, bytes, created);
  }

  const std::shared_ptr<const Driver> d_;
  const CUdevice device_;
  const CUcontext ctx_;
  const size_t granularity_;
};

}  // namespace

namespace {

// The memory of the device `pick` names, through `library`.
absl::StatusOr<std::unique_ptr<SlabMemory>> OpenCuda(
    const std::string& library, const std::function<absl::Status(const Driver&, CUdevice*)>& pick) {
  absl::StatusOr<std::shared_ptr<const Driver>> loaded = Load(library);
  if (!loaded.ok()) return loaded.status();
  const Driver& d = **loaded;
  if (absl::Status s = d.Check("cuInit", d.Init(0)); !s.ok()) return s;
  CUdevice dev = 0;
  if (absl::Status s = pick(d, &dev); !s.ok()) return s;
  CUcontext ctx = nullptr;
  if (absl::Status s = d.Check("cuDevicePrimaryCtxRetain", d.PrimaryCtxRetain(&ctx, dev));
      !s.ok()) {
    return s;
  }
  const CUmemAllocationProp prop = DeviceProp(dev);
  size_t granularity = 0;
  absl::Status s;
  {
    Current current(d, ctx);
    s = d.Check("cuMemGetAllocationGranularity",
                d.Granularity(&granularity, &prop, kGranularityMinimum));
  }
  if (s.ok() && granularity == 0) s = absl::FailedPreconditionError("a granularity of 0");
  if (!s.ok()) {
    d.PrimaryCtxRelease(dev);
    return s;
  }
  return std::unique_ptr<SlabMemory>(
      std::make_unique<CudaMemory>(*std::move(loaded), dev, ctx, granularity));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SlabMemory>> CudaSlabMemory(int device,
                                                           const std::string& library) {
  return OpenCuda(library, [device](const Driver& d, CUdevice* dev) {
    return d.Check("cuDeviceGet", d.DeviceGet(dev, device));
  });
}

absl::StatusOr<std::unique_ptr<SlabMemory>> CudaSlabMemoryOnBus(const std::string& bus_id,
                                                                const std::string& library) {
  return OpenCuda(library, [&bus_id](const Driver& d, CUdevice* dev) {
    return d.Check(absl::StrCat("cuDeviceGetByPCIBusId(", bus_id, ")").c_str(),
                   d.DeviceGetByPCIBusId(dev, bus_id.c_str()), absl::StatusCode::kInvalidArgument);
  });
}

absl::StatusOr<std::unique_ptr<SlabMemory>> SlabMemoryOfKind(const std::string& kind,
                                                              const std::string& gpu_bus_id) {
  if (kind == "host") return HostSlabMemory();
  if (kind == "cuda") {
    return gpu_bus_id.empty() ? CudaSlabMemory() : CudaSlabMemoryOnBus(gpu_bus_id);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("slabs are \"host\" or \"cuda\", not \"", kind, "\""));
}

}  // namespace stoker::shm
