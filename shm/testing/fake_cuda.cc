// A CUDA driver library for tests of run-time loading: every entry point
// shm/cuda_slabs.cc resolves is here, and each reports that the machine
// has no device (CUDA_ERROR_NO_DEVICE), as the real driver does on a node
// without a GPU.
extern "C" {

constexpr int kNoDevice = 100;

int cuGetErrorName(int error, const char** name) {
  *name = error == kNoDevice ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN";
  return 0;
}

#define STOKER_NO_DEVICE(name) \
  int name() { return kNoDevice; }
STOKER_NO_DEVICE(cuInit)
STOKER_NO_DEVICE(cuDeviceGet)
STOKER_NO_DEVICE(cuDeviceGetByPCIBusId)
STOKER_NO_DEVICE(cuDevicePrimaryCtxRetain)
STOKER_NO_DEVICE(cuDevicePrimaryCtxRelease_v2)
STOKER_NO_DEVICE(cuCtxPushCurrent_v2)
STOKER_NO_DEVICE(cuCtxPopCurrent_v2)
STOKER_NO_DEVICE(cuMemGetAllocationGranularity)
STOKER_NO_DEVICE(cuMemCreate)
STOKER_NO_DEVICE(cuMemRelease)
STOKER_NO_DEVICE(cuMemExportToShareableHandle)
STOKER_NO_DEVICE(cuMemImportFromShareableHandle)
STOKER_NO_DEVICE(cuMemAddressReserve)
STOKER_NO_DEVICE(cuMemAddressFree)
STOKER_NO_DEVICE(cuMemMap)
STOKER_NO_DEVICE(cuMemUnmap)
STOKER_NO_DEVICE(cuMemSetAccess)
STOKER_NO_DEVICE(cuMemcpyHtoD_v2)
STOKER_NO_DEVICE(cuMemcpyDtoH_v2)
STOKER_NO_DEVICE(cuCtxSynchronize)
#undef STOKER_NO_DEVICE

}  // extern "C"
