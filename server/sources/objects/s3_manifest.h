// The samples a manifest names in an S3 API store (S3Source.manifest):
// objects, or WebDataset shards, listed in a file rather than found by
// listing the bucket.
//
// The manifest: an object ("s3://bucket/key": a HEAD, then one GET at
// that version, as the caller; the same endpoint) or a local file (read
// through limits.fs beneath limits.within: the folder the trainer's
// client proved, as a local dataset's manifest is read). At most
// limits.max_file_bytes; its lines are the `list` source's
// (ParseManifestText: `key[<TAB>key...][<TAB>label]`, a label 0 when
// absent, at most kMaxFilesPerSample keys a line, every line as many),
// each key below `url`'s prefix.
//
// Objects: the folders the keys are in are listed as the caller (at most
// 16 at a time, delimited, page by page, each bounded as Lister bounds
// it: every object seen counts against max_files), and each key takes its
// listed size and ETag as its identity; a key not listed is NOT_FOUND
// naming it and its line's sample number. A key named twice is one
// object (read, and proven, once). The
// samples are the lines in order, their files the keys (a mask second),
// read as s3_objects.h reads them.
//
// Shards: when every line is one .tar key, the manifest lists WebDataset
// shards, opened in its order as s3_shards.h opens a pattern's (a label
// column is ignored: labels are the shards' own). A manifest that mixes
// both is FAILED_PRECONDITION.
//
// Memory: the lines, the keys and their folders are charged to the caller
// (ScanLimits::charge_list) while the samples are made; of what the
// folders' listings hold, only the keys named are kept.
//
// Errors name the manifest: its reading's (PERMISSION_DENIED, NOT_FOUND,
// RESOURCE_EXHAUSTED over the cap), a malformed line (FAILED_PRECONDITION
// with its number, never its text), a key not listed (NOT_FOUND with the
// key: the caller's own, read as the caller; an admin's manifest is read
// with the daemon's rights, and an admin may read any file anyway), and
// the listing's.
#ifndef STOKER_SERVER_SOURCES_OBJECTS_S3_MANIFEST_H_
#define STOKER_SERVER_SOURCES_OBJECTS_S3_MANIFEST_H_

#include <string>

#include "absl/status/statusor.h"
#include "server/dataset/dataset.h"
#include "server/objstore/object_store.h"
#include "server/sources/objects/s3_lister.h"
#include "server/sources/source.h"

namespace stoker {

absl::StatusOr<Dataset> OpenS3Manifest(const S3Url& url, const std::string& manifest,
                                       const ObjectStoreAccess& access, ObjectStore* client,
                                       const ScanLimits& limits, const KeptListing& keep,
                                       const ReadAhead& ahead,
                                       const std::vector<std::string>& members);

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_OBJECTS_S3_MANIFEST_H_
