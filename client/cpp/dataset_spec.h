// How a client names a dataset: a path whose kind is recognised, or a
// source given explicitly as JSON, with every path made absolute (the
// daemon resolves paths in its own working folder). The one place clients
// turn words into a DatasetSpec: stokerctl, the C ABI (stoker_dataset_json)
// and so the Python package use it; Client::OpenSession makes paths
// absolute for C++ callers too. Runs as the client's user, who may look at
// their own files. Stateless; thread-safe.
#ifndef STOKER_CLIENT_CPP_DATASET_SPEC_H_
#define STOKER_CLIENT_CPP_DATASET_SPEC_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/stoker.pb.h"

namespace stoker {

// `dataset` is either
//   - a JSON object naming one source by its kind's key, in protobuf's JSON
//     mapping of DatasetSpec: {"lmdb": {"path": "db", "manifest": "m.tsv"}};
//   - or an object store URL, "s3://bucket/prefix/":           s3
//   - or a path, recognised by content, then by suffix in any case:
//       a file starting with NumPy's magic, or named *.npy:    npy
//       a gzip stream or NIfTI header, a file named *.nii or
//         *.nii.gz, or a manifest whose first file is one:      nifti
//       a file with HDF5's signature, or named *.h5/*.hdf5:   INVALID_ARGUMENT
//         (an HDF5 source needs its dataset's name: give it as JSON)
//       a picture (JPEG or PNG, by content or name):           INVALID_ARGUMENT
//         (saying what to name instead)
//       a file named *.tar:                                     webdataset
//       a path whose last part holds {first..last} ranges and
//         ends in .tar ("shards/train-{000000..000146}.tar"):   webdataset
//         (its folder, and the shards' names in it)
//       any other file:                                         list (manifest)
//       a folder holding data.mdb:                              lmdb
//       a folder holding .tar files and no folders:            webdataset
//       a folder whose first file (in name order) named or
//         starting as one of the arrays above is a NIfTI
//         volume (by name, or a plain header), an npy array,
//         or an HDF5 file: nifti, npy, INVALID_ARGUMENT as above
//       any other folder, or a path that does not exist:        folder
// `root` (may be empty) sets the source's `root` (a manifest's folder);
// INVALID_ARGUMENT for a kind that has none. INVALID_ARGUMENT naming what
// is wrong for JSON that is not one source.
absl::StatusOr<v1::DatasetSpec> NameDataset(absl::string_view dataset, const std::string& root);

// Makes every field of the source marked (file_path) absolute against the
// working folder, lexically normalized.
void MakeDatasetPathsAbsolute(v1::DatasetSpec* ds);

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_DATASET_SPEC_H_
