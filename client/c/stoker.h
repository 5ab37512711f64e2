/* stoker.h: the C ABI of the Stoker client (libstoker.so).
 *
 * This header is the manual. It lets any language with a C FFI (Python's
 * ctypes, Rust, Go, Julia, ...) connect to stokerd, open a session and read
 * its batches zero-copy from the shared-memory ring. libstoker.so exports
 * only the functions below (a version script); gRPC, protobuf, abseil and
 * the C++ runtime are linked inside it with hidden symbols, so it can share a
 * process with any other copy of them (grpcio, torch, tensorflow).
 *
 * Versioning. STOKER_ABI_VERSION changes only when an existing function or
 * struct changes incompatibly; functions are only ever added. Call
 * stoker_abi_version() and refuse to run on a mismatch. Structs filled by
 * the library take their size from the caller (`struct_size`), so a newer
 * library can serve an older caller.
 *
 * Errors. Every fallible call returns a status code: 0 (STOKER_OK) or one of
 * the canonical codes below (gRPC's numbering: 3 INVALID_ARGUMENT, 4
 * DEADLINE_EXCEEDED, 5 NOT_FOUND, 7 PERMISSION_DENIED, 8 RESOURCE_EXHAUSTED,
 * 9 FAILED_PRECONDITION, 13 INTERNAL, 14 UNAVAILABLE, ...). When `err` is not
 * NULL it receives the code and a message naming the offending argument,
 * path or socket. Nothing is allocated for an error.
 *
 * Ownership. Objects are created by stoker_connect / stoker_open_session /
 * stoker_next and freed by the matching *_free / stoker_batch_release.
 * Strings returned as `char**` are freed with stoker_string_free. A session
 * may outlive its client, and a batch its session: the ring stays mapped
 * until the last batch is released.
 *
 * Threads. A client may be used from several threads. A session's
 * stoker_next must be called from one thread at a time; batches may be
 * released from any thread. Blocking calls release no locks the caller
 * holds: call them without holding an interpreter lock (ctypes does this).
 */
#ifndef STOKER_CLIENT_C_STOKER_H_
#define STOKER_CLIENT_C_STOKER_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STOKER_ABI_VERSION 1

#define STOKER_OK 0

/* Element types of a field; the ring header's dtype codes. */
#define STOKER_DTYPE_UINT8 1
#define STOKER_DTYPE_FLOAT32 2
#define STOKER_DTYPE_FLOAT16 3
#define STOKER_DTYPE_UINT16 4
#define STOKER_DTYPE_INT16 5
#define STOKER_DTYPE_INT32 6
#define STOKER_DTYPE_INT64 7
#define STOKER_DTYPE_BFLOAT16 8

/* Most dimensions a field has per sample. */
#define STOKER_MAX_FIELD_DIMS 6

/* Per-sample status codes (stoker_batch_info.status). */
#define STOKER_SAMPLE_OK 0
#define STOKER_SAMPLE_READ_ERROR 1
#define STOKER_SAMPLE_DECODE_ERROR 2
#define STOKER_SAMPLE_REPLACED 3

typedef struct stoker_client stoker_client;
typedef struct stoker_session stoker_session;
typedef struct stoker_batch stoker_batch;

typedef struct stoker_error {
  int code;           /* Same as the call's return value. */
  char message[1024]; /* NUL-terminated; truncated if longer. */
} stoker_error;

/* One ready batch. Pointers stay valid until stoker_batch_release. A batch
 * is a set of named fields (stoker_batch_get_field); `data` and `labels`
 * here are shortcuts for the first field and an int32 "label" field. */
typedef struct stoker_batch_info {
  const void* data;      /* The first field's valid samples. */
  uint64_t size_bytes;   /* samples * sample_bytes. */
  uint64_t sample_bytes; /* Bytes per sample of the first field. */
  uint32_t dtype;        /* STOKER_DTYPE_*. */
  uint32_t ndim;         /* 1 + the first field's dims when that is <= 3,
                          * else 0 (use stoker_batch_get_field). */
  /* [samples, per-sample dims...]; for the presets' image
   * [samples, height, width, channels] for uint8 (NHWC),
   * [samples, channels, height, width] for float dtypes (NCHW). */
  uint64_t shape[4];
  uint32_t samples;      /* Valid samples; short at an epoch's end. */
  uint32_t error_count;  /* Samples whose status is not STOKER_SAMPLE_OK. */
  const int32_t* labels;   /* [samples], or NULL without an int32 "label" */
  const uint32_t* status;  /* [samples], STOKER_SAMPLE_* */
  const uint64_t* indices; /* [samples], dataset sample index */
  uint64_t epoch;
  uint64_t batch_index;    /* Within the epoch. */
  uint64_t sequence;       /* Counted from the session's start. */
  const void* mapping_base; /* The whole ring mapping (pin it once). */
  uint64_t mapping_size;
  uint32_t copied;          /* 1: a private copy, holding no ring slot: its
                             * data lie outside the mapping, in pageable
                             * memory that stoker_batch_release frees. */
  uint32_t reserved0;
} stoker_batch_info;

/* STOKER_ABI_VERSION of the loaded library. */
uint32_t stoker_abi_version(void);
/* Release version, e.g. "0.2.0". Static storage. */
const char* stoker_version(void);

/* Connects to stokerd at unix:`socket_path`, waiting up to `timeout_seconds`.
 * PERMISSION_DENIED when this user may not use the socket, UNAVAILABLE when
 * nothing answers. */
int stoker_connect(const char* socket_path, double timeout_seconds,
                   stoker_client** out, stoker_error* err);
void stoker_client_free(stoker_client* client);

/* The daemon to use when none is named (client/cpp/daemon_locator.h), as
 * JSON: {"socket": path, "embedded": bool, "log": path (embedded only),
 * "described": words for messages}. "embedded": this user's embedded
 * daemon, whether it runs or not (the caller starts it). UNAVAILABLE when
 * $STOKER_SOCKET names a socket where nothing answers. */
int stoker_locate_daemon(char** json_out, stoker_error* err);
/* 1 when something listens on the Unix socket at `path` (a full backlog
 * included), else 0. Never waits. */
int stoker_socket_answers(const char* path);

/* Opens a session. `spec_json` is a stoker.v1.SessionSpec in protobuf's JSON
 * mapping (proto/spec.proto is the schema), e.g.
 *   {"dataset": {"folder": {"path": "/data/train"}},
 *    "batch_size": 256, "transform": "train", "image_size": 224}
 * Enum values may be given by their full name (TRANSFORM_TRAIN) or their
 * short name in any case (train). INVALID_ARGUMENT for JSON that does not
 * match the schema (naming the field); otherwise the daemon's code and
 * message. */
int stoker_open_session(stoker_client* client, const char* spec_json,
                        stoker_session** out, stoker_error* err);

/* Checks `spec_json` (as for stoker_open_session) against every rule that
 * does not depend on the data or the daemon's state, with the daemon's own
 * code: STOKER_OK, or INVALID_ARGUMENT naming the first bad field as the
 * daemon would. Needs no daemon. A spec that passes may still be refused
 * by stoker_open_session for what only the daemon sees (its files, nodes
 * and quotas). */
int stoker_check_spec(const char* spec_json, stoker_error* err);

/* The dtype table STOKER_DTYPE_* codes come from, as JSON:
 * [{"code": 1, "name": "uint8", "bytes": 1, "format": "B", "float": false,
 * "numpy": "uint8", "torch": "uint8"}, ...], "format" being the Python
 * struct character of one element (16-bit floats: "H", their raw patterns),
 * "numpy" the dtype a numpy view has (bfloat16: "uint16", numpy has none)
 * and "torch" a tensor's. Static storage: not freed. */
const char* stoker_dtypes_json(void);

/* Every op and its parameter defaults, as the schema (ops.proto's
 * default_value options) writes them and the daemon applies them to a
 * parameter a spec leaves unset: {"flip": {"probability": 0.5}, "rot90":
 * {"axes": [0, 1], ...}, "center_crop": {}, ...}, ops and parameters by
 * their spec names. Static storage: not freed. */
const char* stoker_op_defaults_json(void);

/* The source kinds a dataset spec may name, as JSON, in the schema's order
 * (DatasetSpec's `source`): ["folder", "list", ...]. Static storage: not
 * freed. */
const char* stoker_source_kinds_json(void);

/* The session's settings that have a default or a range, by their spec
 * paths, as the schema (spec.proto's default_value, min_value and
 * max_value options) writes them and the daemon applies and checks them:
 * {"ring_slots": {"default": 4, "min": 2, "max": 256}, "batch_size":
 * {"min": 1, "max": 65536}, "image_size": {"default": 224, "min": 1, "max":
 * 4096, "preset": true}, "client_decode.max_bytes": {...}, ...}. A setting
 * left unset takes its default; one set is checked against its range. Static
 * storage: not freed. */
const char* stoker_session_settings_json(void);

/* How a client names a dataset, as the "dataset" of a spec: `dataset` is a
 * source as JSON under its kind's key, one of stoker_source_kinds_json()
 * ({"lmdb": {"path": "db", "manifest": "m.tsv"}}), or a path whose kind is
 * recognised by content, then by suffix in any case (s3://bucket/prefix/:
 * s3; .npy: npy; an HDF5
 * file: INVALID_ARGUMENT asking for its dataset's name; a .tar file, a
 * folder of them (and no folders), or dir/train-{000000..000146}.tar:
 * webdataset; another file: a manifest; a folder holding data.mdb: lmdb;
 * another folder, or a missing path: an image folder). `root` (may be NULL or empty) sets a
 * manifest's folder. Paths come back absolute. *json_out is a
 * stoker.v1.DatasetSpec; free it with stoker_string_free. */
int stoker_dataset_json(const char* dataset, const char* root, char** json_out,
                        stoker_error* err);

/* The daemon's OpenSessionResponse as JSON (session id, samples and batches
 * per epoch, classes, ...), with integers as JSON numbers. Free with
 * stoker_string_free. */
int stoker_session_info_json(const stoker_session* session, char** json_out,
                             stoker_error* err);
/* The daemon's session id; a new one after the session was resumed. */
uint64_t stoker_session_id(const stoker_session* session);
/* How often stoker_next reconnected to a restarted daemon: it does so by
 * itself (for up to the resume window, 60 s by default) and goes on with the
 * next undelivered batch, the same data as without the restart. */
uint64_t stoker_session_reconnects(const stoker_session* session);
/* Sets the resume window in seconds; 0 never reconnects. */
void stoker_session_set_resume_window(stoker_session* session, double seconds);

/* The files behind `n` dataset sample indices (stoker_batch_info.indices) of
 * this session, as a JSON array of strings; e.g. to name failed samples.
 * Free with stoker_string_free. */
int stoker_session_describe_samples(stoker_session* session,
                                    const uint64_t* indices, size_t n,
                                    char** json_out, stoker_error* err);
/* The same in full: the daemon's DescribeSamplesResponse as JSON, integers
 * as numbers: {"paths": [...], "samples": [{"files": [{"path", "shape",
 * "affine"}]}]}, per index each of the sample's files; for typed arrays
 * their shape and, for NIfTI, the 4 x 4 voxel-to-world affine (row-major
 * 16 numbers). Free with stoker_string_free. */
int stoker_session_describe(stoker_session* session, const uint64_t* indices, size_t n,
                            char** json_out, stoker_error* err);

/* Client decode (the spec's client_decode): the share of each batch the
 * daemon decodes itself, 0..1 (clamped), from the next batch it starts; it
 * is kept across a resume. */
void stoker_session_set_cpu_share(stoker_session* session, double share);
/* What the daemon reports of its own decoding for this session. */
typedef struct stoker_daemon_decode {
  uint64_t samples;  /* Samples it decoded. */
  uint64_t nanos;    /* Their decode + transform time, summed over threads. */
  uint32_t threads;  /* The decode threads this session can count on: its
                      * node's pool x its priority / those of the node's
                      * producing sessions. */
  double share;      /* The share in effect. */
} stoker_daemon_decode;
/* Fills `out` (`struct_size` = the caller's sizeof). INVALID_ARGUMENT
 * (3) for a NULL argument. */
int stoker_session_daemon_decode(const stoker_session* session,
                                 stoker_daemon_decode* out, size_t struct_size);

/* Waits for the next batch in order; `timeout_seconds` < 0 waits without a
 * limit. With the spec's on_error ON_ERROR_RAISE, a batch holding a failed
 * sample is DATA_LOSS naming its file (the next call goes on). UNAVAILABLE when the daemon went away or closed the session,
 * DEADLINE_EXCEEDED after the timeout. A batch taken while the caller holds
 * every other ring slot is a private copy (stoker_batch_info.copied) that
 * holds no slot; the session's first one writes a warning to stderr.
 * FAILED_PRECONDITION when every slot is held all the same (no memory for
 * the copy). */
int stoker_next(stoker_session* session, double timeout_seconds,
                stoker_batch** out, stoker_error* err);
/* stoker_next within one pass over `epoch`: OUT_OF_RANGE (11), taking
 * nothing, when the next batch is of a later epoch. */
int stoker_next_in_epoch(stoker_session* session, uint64_t epoch, double timeout_seconds,
                         stoker_batch** out, stoker_error* err);
/* This rank's batches per epoch. A session whose spec asked for a streamed
 * opening may be answered before its dataset's size is known (the info's
 * batches_per_epoch 0): this waits up to `timeout_seconds` (< 0: no limit)
 * for it; the session's failure (its code, e.g. DATA_LOSS naming a shard)
 * when its opening failed first, UNAVAILABLE when the daemon went away. */
int stoker_session_batches_per_epoch(stoker_session* session, double timeout_seconds,
                                     uint64_t* out, stoker_error* err);

/* Closes the session in the daemon now; later stoker_next calls fail with
 * FAILED_PRECONDITION. Batches still held stay readable. */
int stoker_session_close(stoker_session* session, stoker_error* err);
/* Closes (best effort) and frees the session. */
void stoker_session_free(stoker_session* session);

/* Fills `info` (`struct_size` = sizeof(stoker_batch_info) of the caller). */
int stoker_batch_get_info(const stoker_batch* batch, stoker_batch_info* info,
                          size_t struct_size);
/* One field of every sample. Pointers stay valid until
 * stoker_batch_release. */
typedef struct stoker_field_info {
  const char* name;      /* NUL-terminated. */
  const void* data;      /* The valid samples: samples * sample_bytes. */
  uint64_t size_bytes;
  uint64_t sample_bytes;
  uint32_t dtype;        /* STOKER_DTYPE_*. */
  uint32_t ndim;         /* 1 + per-sample dims (a scalar field: 1). */
  uint64_t shape[1 + STOKER_MAX_FIELD_DIMS]; /* [samples, dims...] */
  /* The same bytes in the batch's slab (the spec's slabs): a device
   * address for slabs in GPU memory (MEMORY_CUDA). NULL without slabs, and
   * in a private copy. Zero the struct first: a library older than slabs
   * leaves it unset. The slab goes back with the batch: finish the GPU
   * work that reads it before stoker_batch_release. */
  void* slab;
} stoker_field_info;

/* Number of fields in the batch (the same for every batch of a session). */
uint32_t stoker_batch_field_count(const stoker_batch* batch);
/* Fills `info` for field `index` (< stoker_batch_field_count);
 * INVALID_ARGUMENT for an index out of range. */
int stoker_batch_get_field(const stoker_batch* batch, uint32_t index,
                           stoker_field_info* info, size_t struct_size);

/* Returns the batch's slot to the daemon; its pointers become invalid. */
void stoker_batch_release(stoker_batch* batch);

/* The daemon's stoker.v1.DaemonStats as JSON (numbers as numbers). */
int stoker_stats_json(stoker_client* client, char** json_out,
                      stoker_error* err);
/* grpc.health.v1 Check: STOKER_OK when the daemon is SERVING. */
int stoker_health(stoker_client* client, stoker_error* err);

void stoker_string_free(char* s);

/* The order-sensitive 64-bit content hash `stokerctl read` prints, so other
 * languages can compare what they read: start from stoker_checksum_init(),
 * feed bytes in order, print stoker_checksum_value() as 16 hex digits. */
typedef struct stoker_checksum {
  uint64_t state;
} stoker_checksum;
void stoker_checksum_init(stoker_checksum* c);
void stoker_checksum_update(stoker_checksum* c, const void* data, size_t n);
uint64_t stoker_checksum_value(const stoker_checksum* c);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* STOKER_CLIENT_C_STOKER_H_ */
