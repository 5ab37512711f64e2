// The `nifti` source: NIfTI-1/2 volumes (.nii, gzip-compressed .nii.gz) as
// an ArraySource, each volume's axes and values as nibabel gives them
// (server/sources/arrays/nifti_file.h). `path` is
//   - a volume: one sample;
//   - a folder: its volumes in name order, one sample each (files named
//     *.nii or *.nii.gz in any case, or whose content is a NIfTI volume;
//     other entries are skipped);
//   - a manifest of `image[<TAB>label][<TAB>class]` lines, files relative to
//     `root` (empty: the manifest's folder): a sample is its image volume
//     (array 0), its label volume when the lines have one (array 1, of the
//     image's shape: a KIND_ARRAY field with `file: 1` reads it, patched
//     jointly), and its class (0 without).
// Every header is read through the caller's confinement and checked when
// the source opens; a volume whose header is bad, or a label volume of
// another shape, is a broken sample (its reads fail, per sample), and a
// source of no readable volume is FAILED_PRECONDITION.
//
// A volume is decoded whole into the daemon's volume cache on its first
// read (inflated, reordered, scaled), so a patch costs a strided copy. A
// volume larger than the whole cache is read region by region from its
// mapping when it is uncompressed; a compressed one is then a per-sample
// error naming the flag (a gzip stream cannot be read by region), and the
// daemon's log says so once per file.
#ifndef STOKER_SERVER_SOURCES_ARRAYS_NIFTI_H_
#define STOKER_SERVER_SOURCES_ARRAYS_NIFTI_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/dataset/array_source.h"
#include "server/sources/source.h"

namespace stoker {

absl::StatusOr<std::shared_ptr<const ArraySource>> OpenNiftiSource(const std::string& path,
                                                                   const std::string& root,
                                                                   const SourceContext& ctx);

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_ARRAYS_NIFTI_H_
