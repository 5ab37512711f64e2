// The `s3` source (proto S3Source): data in an S3 API store, read as the
// caller. The kind opens an ImageFolder (s3_folder.h: a prefix of class
// prefixes), shards (s3_shards.h: a URL ending in .tar or a brace
// pattern, or `shards`; a prefix of .tar objects and no classes), or the
// samples a manifest names (s3_manifest.h: `manifest`; INVALID_ARGUMENT
// with shards named too). It reads through SourceContext's object store
// client and the session's access (the trainer's endpoint and
// credentials), and no local file but a manifest, beneath the caller's
// proved folder: FAILED_PRECONDITION when the daemon has no object store
// endpoints, UNAUTHENTICATED when the session brought no credentials.
//
// Thread-safe; the client outlives the source.
#ifndef STOKER_SERVER_SOURCES_OBJECTS_S3_H_
#define STOKER_SERVER_SOURCES_OBJECTS_S3_H_

// The kind declares nothing of its own: it is registered by its line in
// sources.def (STOKER_DEFINE_SOURCE in s3.cc); what it opens with is in
// the headers above.

#endif  // STOKER_SERVER_SOURCES_OBJECTS_S3_H_
