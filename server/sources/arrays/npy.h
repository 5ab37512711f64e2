// The `npy` source: NumPy arrays, one .npy file of N samples (sample i is
// array[i]) or a folder of .npy files (sorted; one sample each, any
// shapes), mapped through the caller's confinement (server/sources/
// source.h) and held in RAM as far as the caller's budget allows.
#ifndef STOKER_SERVER_SOURCES_ARRAYS_NPY_H_
#define STOKER_SERVER_SOURCES_ARRAYS_NPY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/dataset/array_source.h"

namespace stoker {

// Opens a NumPy source: `path` a .npy file of N samples or a folder of .npy
// files; `labels` (may be empty) a .npy of N integers. Paths are opened
// beneath `beneath` when it is set. Files are held in RAM (Resident) as far
// as `charge` allows, else read from their mapping.
// A single file of more than `max_samples` rows is RESOURCE_EXHAUSTED, rows
// of zero elements FAILED_PRECONDITION; every size is overflow-checked
// against the file.
absl::StatusOr<std::shared_ptr<const ArraySource>> OpenNpySource(
    const std::string& path, const std::string& labels,
    std::shared_ptr<const Beneath> beneath, const ChargeRam& charge,
    uint64_t max_samples = kDefaultMaxArraySamples);

// Parses a .npy header (for tests and the fuzz run): type, shape, and the
// offset of the data; FAILED_PRECONDITION naming what is wrong.
struct NpyHeader {
  ElemType type = ElemType::kUint8;
  std::vector<uint64_t> shape;
  uint64_t data_offset = 0;
};
absl::StatusOr<NpyHeader> ParseNpyHeader(const uint8_t* data, size_t size);

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_ARRAYS_NPY_H_
