// WebDataset shards in an S3 API store (proto S3Source with shards): the
// samples WebDataset's rules group from .tar objects (tar_index.h), read
// as the caller, as the `webdataset` kind reads local shards.
//
// Shards: one .tar object (a URL ending in .tar: its HEAD), the names a
// brace pattern or a manifest (s3_manifest.h) gives in the URL's prefix,
// or every .tar object directly in the prefix, in key order. Listed as the
// caller, page by page: the prefix once (delimited, unless the pattern
// names folders), or each folder a manifest's names lie in (delimited, 16
// at a time). A shard's listed size and ETag are its identity, and a name
// not listed is NOT_FOUND naming it. A name given twice is one shard.
//
// Indexing (s3_shard_index.h): a shard's members are found from its
// headers, which lie between its members' bytes, so a shard is read to
// index it (whole, but for members no sample takes that span a block): by
// ranged GETs of large
// blocks at the listed version (If-Match), several shards at once, each
// header and member checked as tar_index.h checks a local file (the listed
// size is the file's); the indexes' memory is charged to the caller as
// sample lists are. Each sample's first picture and its mask (up to
// kMostReadAhead and the file cap each, up to ReadAhead::most_bytes in
// all) are handed to ReadAhead::keep as they stream by, under the key the
// sample's reads are cached under, so the first epoch reads them from the
// daemon's caches rather than the store again. Progress (shards, bytes,
// time left) is logged every few seconds. The listing is bound by the scan
// timeout (ScanLimits::max_time); indexing, which grows with the data, by
// that long without a block or shard done (DEADLINE_EXCEEDED).
//
// Kept indexes: with a place to keep them (the daemon's L2), a shard's
// index is kept under (endpoint, bucket, key, ETag, size, access key id):
// the same principal's next session over the same shard version takes it
// instead of reading the shard. A kept index is checked against the shard
// (every member inside it) before it is taken.
//
// Reading, as the caller: s3_shard_members.h.
//
// Streamed (ScanLimits::streamed, more than one window): the first shards
// (kFirstShards) are indexed before any other, and OpenS3Shards returns
// once a window holds samples; the rest are indexed on the opening's own
// thread into Dataset::growth (shard_assembly.h), which ends with the
// opening's status (a later shard's error), or is cancelled when the
// dataset is dropped. Shards named by a pattern: the first shard's first
// block is asked for beside the listing (no If-Match, the name alone) and
// taken where the listing names the version it read, so the first batch
// comes a round trip sooner (with a kept index for that shard, that block
// is a request made for nothing).
//
// Errors name the URL or the shard: PERMISSION_DENIED (credentials
// refused), NOT_FOUND, FAILED_PRECONDITION (no shards, no samples with an
// image), DATA_LOSS (a hostile or changed shard), RESOURCE_EXHAUSTED (past
// the limits or the caller's memory), DEADLINE_EXCEEDED, CANCELLED.
//
// Thread-safe; the client outlives the source.
#ifndef STOKER_SERVER_SOURCES_OBJECTS_S3_SHARDS_H_
#define STOKER_SERVER_SOURCES_OBJECTS_S3_SHARDS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/dataset/dataset.h"
#include "server/objstore/object_store.h"
#include "server/sources/objects/s3_lister.h"
#include "server/sources/objects/s3_shard_list.h"
#include "server/sources/source.h"

namespace stoker {

// Opens the shards `url` and `named` name (s3_shard_list.h), as above.
// `keep.values` keeps indexes (null: none; keep.refresh: none is taken);
// pictures and masks of at most kMostReadAhead bytes are read ahead into
// `ahead`, up to ahead.most_bytes in all. `listed` (may be null): the
// prefix's .tar objects, when the caller has just listed them.
absl::StatusOr<Dataset> OpenS3Shards(const S3Url& url, const ShardNames& named,
                                     const ObjectStoreAccess& access, ObjectStore* client,
                                     const ScanLimits& limits, const KeptListing& keep,
                                     const ReadAhead& ahead,
                                     std::vector<ListedObject>* listed = nullptr);

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_OBJECTS_S3_SHARDS_H_
