// The `hdf5` source: one HDF5 file whose dataset D [N, ...] holds the
// samples (sample i is D[i]), or a folder of .h5/.hdf5 files (any case:
// .H5 too) whose dataset D is one sample each (volumes), or whose datasets
// D [N_k, ...] hold rows addressed across files in name order (feature
// stores: `rows`, or labels given). Files are opened from their confined descriptor
// (server/sources/source.h); a dataset whose data lies in another file is
// refused.
#ifndef STOKER_SERVER_SOURCES_ARRAYS_HDF5_H_
#define STOKER_SERVER_SOURCES_ARRAYS_HDF5_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/dataset/array_source.h"
#include "server/cache/volume_cache.h"

namespace stoker {

// Opens an HDF5 source: `path` a file (dataset `dataset` [N, ...]) or a
// folder of HDF5 files (dataset `dataset` of each is one sample; with
// `rows` or `labels`, each file's rows are samples, all files' rows one
// after another); `labels` (may be empty) a dataset of N integers in the
// file (in each file of a folder). A chunked or
// compressed dataset is read whole into RAM when `charge` allows (else per
// sample); contiguous files are held as OpenNpySource's. Rows likewise. The
// file is opened from its confined descriptor; a dataset whose data lies in
// another file (external storage, an external link, a virtual dataset) is
// PERMISSION_DENIED, as HDF5 would open that file by path. Each file's chunk
// index is charged to `list_charge` (the user's list memory; none when
// null): RESOURCE_EXHAUSTED past it.
absl::StatusOr<std::shared_ptr<const ArraySource>> OpenHdf5Source(
    const std::string& path, const std::string& dataset,
    const std::string& labels, const ChargeRam& charge,
    std::shared_ptr<const Beneath> beneath,
    uint64_t max_samples = kDefaultMaxArraySamples, bool rows = false,
    VolumeCache* volumes = nullptr, int64_t owner = -1, const ChargeRam& list_charge = nullptr);

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_ARRAYS_HDF5_H_
