// The `s3` source (proto S3Source): an ImageFolder in an S3 API store: `s3://bucket/prefix/` holding one
// prefix per class, each with its .jpg/.jpeg/.png objects (names in any
// case, at any depth below the class), labels in class-name order, as
// torchvision's ImageFolder.
//
// Listing: the class prefixes by one delimited listing, then every class
// listed in parallel (at most 16 at a time, each page by page), never one
// sequential listing of the whole prefix; bounded by the scan limits
// (objects seen against max_files, max_time, cancellation) and charged to
// the caller page by page. An object or prefix outside the one asked for,
// or an object without an ETag, is DATA_LOSS. The listing's size and ETag
// of each object are its identity.
//
// Kept listings: with a place to keep them (the daemon's L2), a listing of
// at most 128 MiB is kept under (endpoint, bucket, prefix, the access key
// id: one principal's listing is never another's), and for 24 hours the
// next session of that principal over it takes it after one listing
// request (at most one key: the proof that its credentials still may list
// the prefix) instead of listing again. It sees the bucket as it was then:
// an object changed or removed since is that sample's DATA_LOSS, whose
// error says how to list again, and added ones are not seen, until a
// session asks to list again (S3Source.refresh). A kept value is charged
// to the caller before it is parsed.
//
// Reading, as the caller: s3_objects.h.
//
// The kind (S3Source) opens an ImageFolder (above), shards (s3_shards.h:
// a URL ending in .tar or a brace pattern, or `shards`), or the samples a
// manifest names (s3_manifest.h: `manifest`; INVALID_ARGUMENT with shards
// named too). It reads through SourceContext's object store client and the
// session's access (the trainer's endpoint and credentials), and no local
// file but a manifest, beneath the caller's proved folder:
// FAILED_PRECONDITION when the daemon has no object store endpoints,
// UNAUTHENTICATED when the session brought no credentials.
//
// Thread-safe; the client outlives the source.
#ifndef STOKER_SERVER_SOURCES_S3_H_
#define STOKER_SERVER_SOURCES_S3_H_

#include "absl/status/statusor.h"
#include "server/dataset/dataset.h"
#include "server/objstore/s3_client.h"
#include "server/sources/source.h"

namespace stoker {

// Where a listing is kept across sessions (SourceContext::kept; null:
// nowhere; charged to the access's owner), and whether to list again
// regardless.
struct KeptListing {
  KeptValues* values = nullptr;
  bool refresh = false;
};

// Lists `url` as an ImageFolder, or takes the listing `keep` holds for it
// (endpoint, bucket, prefix) once the caller proved it may list the prefix
// with one request of its own; a new listing is kept there. Errors name
// the URL: PERMISSION_DENIED (an endpoint not allowed, credentials
// refused), FAILED_PRECONDITION (no class prefixes, no images),
// RESOURCE_EXHAUSTED (past the limits or the caller's memory),
// DEADLINE_EXCEEDED, CANCELLED, and the client's.
// A prefix holding .tar objects and no class prefixes is opened as
// WebDataset shards (s3_shards.h), read ahead into `ahead`.
absl::StatusOr<Dataset> OpenS3Folder(const S3Url& url, const ObjectStoreAccess& access,
                                     S3Client* client, const ScanLimits& limits,
                                     const KeptListing& keep = {},
                                     const ReadAhead& ahead = {});

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_S3_H_
