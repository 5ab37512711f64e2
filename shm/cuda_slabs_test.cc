// Loading the CUDA driver at run time: each way a machine lacks a GPU is a
// clear FAILED_PRECONDITION, and where there is one a slab goes there and
// back through a descriptor. (batch_slabs_test runs the protocol's tests on
// this kind where a GPU is.)
#include "shm/cuda_slabs.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace stoker::shm {
namespace {

void ExpectRefused(const std::string& library, const std::string& words) {
  absl::StatusOr<std::unique_ptr<SlabMemory>> memory = CudaSlabMemory(0, library);
  ASSERT_FALSE(memory.ok()) << library;
  EXPECT_EQ(memory.status().code(), absl::StatusCode::kFailedPrecondition) << memory.status();
  EXPECT_NE(memory.status().message().find(words), std::string::npos) << memory.status();
}

TEST(CudaSlabs, AMachineWithoutAGpuIsToldWhy) {
  ExpectRefused("libcuda-not-here.so.1", "no CUDA driver (libcuda-not-here.so.1");
  ExpectRefused("libm.so.6", "libm.so.6 lacks cuInit");
  ExpectRefused("./shm/libfake_cuda.so", "cuInit: CUDA_ERROR_NO_DEVICE (100)");
}

// A GPU named by its PCI address: each process's numbering may differ.
TEST(CudaSlabs, ABusWithoutAGpuIsRefused) {
  absl::StatusOr<std::unique_ptr<SlabMemory>> fake =
      CudaSlabMemoryOnBus("0000:3b:00.0", "./shm/libfake_cuda.so");
  EXPECT_EQ(fake.status().code(), absl::StatusCode::kFailedPrecondition) << fake.status();
  if (!CudaSlabMemory().ok()) GTEST_SKIP() << "no GPU here";
  absl::StatusOr<std::unique_ptr<SlabMemory>> none = CudaSlabMemoryOnBus("0000:ff:1f.7");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument) << none.status();
}

TEST(CudaSlabs, ASlabGoesToTheGpuAndBackThroughADescriptor) {
  absl::StatusOr<std::unique_ptr<SlabMemory>> memory = CudaSlabMemory();
  if (!memory.ok()) {
    ASSERT_EQ(memory.status().code(), absl::StatusCode::kFailedPrecondition) << memory.status();
    GTEST_SKIP() << memory.status();
  }
  EXPECT_EQ((*memory)->kind(), "cuda");
  absl::StatusOr<std::unique_ptr<Slab>> slab = (*memory)->Create(3 << 20);
  ASSERT_TRUE(slab.ok()) << slab.status();
  std::vector<uint8_t> bytes(3 << 20);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 1);
  ASSERT_TRUE((*slab)->Write(0, bytes.data(), bytes.size()).ok());
  absl::StatusOr<int> fd = (*slab)->Export();
  ASSERT_TRUE(fd.ok()) << fd.status();
  absl::StatusOr<std::unique_ptr<Slab>> imported = (*memory)->Import(*fd, 3 << 20);
  close(*fd);
  ASSERT_TRUE(imported.ok()) << imported.status();
  std::vector<uint8_t> back(bytes.size());
  ASSERT_TRUE((*imported)->Read(0, back.data(), back.size()).ok());
  EXPECT_EQ(back, bytes);
}

}  // namespace
}  // namespace stoker::shm
