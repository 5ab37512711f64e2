// An ImageFolder in an S3 API store (the `s3` kind's default form):
// `s3://bucket/prefix/` holding one prefix per class, each with its
// .jpg/.jpeg/.png objects (names in any case, at any depth below the
// class), labels in class-name order, as torchvision's ImageFolder.
//
// Listing: the class prefixes by one delimited listing, and beside it the
// prefix's first page listed flat (no delimiter). The flat listing goes on
// while the classes its pages cover, and the one they are in, say the
// whole is at most about ScanLimits::flat_listing_objects (4,000, a few of
// a store's pages); each class a flat page holds whole is taken from it
// (so a folder of up to a page is two requests). The others are listed in
// parallel (one at a time per 8 classes, 16 to 64, each page by page), so
// a large folder is never one sequential listing of the whole prefix.
// Flat pages are taken as a store lists keys, in byte order (keys out of
// order cover no class); a flat listing the store or the caller's policy
// refuses (one that allows only delimited listings) leaves it to be
// listed by class. Listed either way, the samples, their numbering, what
// is skipped and the count against max_files are the same (a streamed
// opening counts the classes taken flat whole before it answers, where
// class by class it counts their first keys); bounded by the scan limits
// (objects seen against max_files, max_time, cancellation). An object or
// prefix outside the one asked for, or an object without an ETag, is
// DATA_LOSS. The listing's size and ETag of each object are its identity;
// the samples' names and identities are charged to the caller.
//
// Numbering, and the first epoch's windows: samples are numbered in two
// windows, so that a session may begin before the classes are all listed:
// window 0 holds each class's first 16 images, window 1 all the others;
// within a window, class by class, each class's images in the store's key
// order. An unshuffled epoch reads them in that order (a folder of at most
// 16 images a class: ImageFolder's own); the first shuffled epoch shuffles
// window 0 (every class alike), then window 1, later ones all of it.
// Listed now, taken from a kept listing, streamed or not, a folder is
// numbered alike (a session resumed mid-epoch reads the same order). The
// windows are only the listing's (Dataset::windows_for_listing_only): a
// session with SessionSpec.canonical_first_epoch (a world's default) reads
// the canonical first epoch instead, once the whole listing is published.
//
// A streamed opening (ScanLimits::streamed) lists each class's first 16
// keys (those not taken from the flat listing, which are whole), answers
// once window 0 is published, and lists the rest on the
// opening's background work (in pages of the store's size, fewer classes
// at a time: one per 8, 4 to 64, as the store serves window 0's reads
// too; the scan timeout bounds each page's wait there, not the whole),
// then publishes window 1; an error ends the growth with it. Until then
// the caches plan for 1,000 images a class not yet listed to its end.
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
// Reading, as the caller: s3_objects.h. Thread-safe; the client outlives
// the dataset.
#ifndef STOKER_SERVER_SOURCES_OBJECTS_S3_FOLDER_H_
#define STOKER_SERVER_SOURCES_OBJECTS_S3_FOLDER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "server/dataset/dataset.h"
#include "server/objstore/object_store.h"
#include "server/sources/objects/s3_lister.h"
#include "server/sources/source.h"

namespace stoker {

// Window 0's share of each class: its first images.
constexpr uint64_t kFolderFirstWindowPerClass = 16;

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
                                     ObjectStore* client, const ScanLimits& limits,
                                     const KeptListing& keep = {},
                                     const ReadAhead& ahead = {},
                                     const std::vector<std::string>& members = {});

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_OBJECTS_S3_FOLDER_H_
