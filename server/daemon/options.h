// What a daemon is configured with: pools, NUMA placement, cache sizes,
// per-user and node-wide limits, the rings' names and the handoff socket.
// A plain struct; stokerd fills it from its flags (server/daemon/flags.h),
// tests set what they need. Daemon's constructor fills in the zeros that
// mean "as the machine has".
#ifndef STOKER_SERVER_DAEMON_OPTIONS_H_
#define STOKER_SERVER_DAEMON_OPTIONS_H_

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "server/access/file_system.h"
#include "server/cache/l2_cache.h"
#include "server/dataset/dataset.h"
#include "server/imaging/jpeg.h"
#include "server/objstore/s3_client.h"

namespace stoker {

// Decode pools per NUMA node: auto = one per node when there are several.
enum class NumaMode { kAuto, kOn, kOff };

struct DaemonOptions {
  int decode_threads = 0;  // 0: one per online core.
  NumaMode numa = NumaMode::kAuto;
  // Hand-made nodes ("0-3;4-7", server/pool/topology.h) instead of the
  // machine's; decode pools per node then whatever `numa` says.
  std::string numa_topology;
  // Sessions may use other nodes' idle decode threads.
  bool numa_spill = true;
  // Where GPUs' NUMA nodes are read (/sys/bus/pci/devices/...); tests
  // point it at a tree of their own.
  std::string sysfs = "/sys";
  int reader_threads = 64;  // Outstanding source reads.
  // Reader threads one user's sessions may hold at once (ThreadPool's user
  // cap; the daemon's own reads are not capped); 0: DefaultReaderCap.
  int max_reader_threads_per_user = 0;
  // Bytes of source files being read at once, or read and waiting for
  // their decode, in all (half for one user; one read larger than that
  // runs alone), charged before each read by the file's size: what reads
  // hold however large the files users name and however many reader
  // threads. A file larger than this is RESOURCE_EXHAUSTED.
  uint64_t max_read_bytes_in_flight = 2ULL << 30;
  // Bytes of pictures being decoded whose decode needs over
  // kKeptDecodeBytes (server/imaging/jpeg.h), in all (half for one user),
  // charged before the decode allocates.
  uint64_t max_decode_bytes_in_flight = 2ULL << 30;
  uint64_t l1_bytes = 2ULL << 30;
  uint64_t decoded_cache_bytes = 1ULL << 30;
  uint64_t pixel_cache_bytes = 2ULL << 30;  // SessionSpec.pixel_cache's RAM.
  // Decoded chunked or compressed volumes (HDF5 volume folders), shared.
  uint64_t volume_cache_bytes = 4ULL << 30;
  // The object store endpoints sessions may reach ("https://host[:port]",
  // comma-separated, and "aws": AWS's own); empty: none, and s3 sources
  // are refused unless the next allows them.
  std::string object_store_endpoints;
  // Admins' sessions reach whatever endpoint their client resolved, listed
  // or not: only for a daemon that serves one user (the embedded one, whose
  // one admin is that user; flags.cc refuses it elsewhere).
  bool object_store_own_endpoints = false;
  // Each object store request's deadline (its time queued, its attempts
  // and their backoff included), and the speed below which an attempt is
  // abandoned as too slow once it has kept below it for
  // object_store_low_speed_time (0 bytes: no such speed): S3Client's.
  absl::Duration object_store_deadline = S3Client::Options().deadline;
  uint64_t object_store_low_speed_bytes = S3Client::Options().low_speed_bytes;
  absl::Duration object_store_low_speed_time = S3Client::Options().low_speed_time;
  // RAM array sources may hold (RAM copies of files, datasets read whole)
  // is charged against l1_bytes in all and this per non-admin user (0: only
  // the total binds); past either they read from their mappings.
  uint64_t max_array_bytes_per_user = 0;
  // RAM one non-admin user's open datasets' sample lists (paths, names)
  // may take together; a dataset whose list would pass it is
  // RESOURCE_EXHAUSTED while it is being built.
  uint64_t max_list_bytes_per_user = 4ULL << 30;
  // Files one non-admin user's sources may keep open or mapped together
  // (each is one of the daemon's descriptors or maps); all users together:
  // three quarters of the daemon's descriptor limit and of
  // vm.max_map_count, whichever is lower.
  uint64_t max_open_files_per_user = 16384;
  L2Options l2;  // l2.path empty: no L2.
  // Autotune: resize the decode pool within [1, max_decode_threads] and the
  // reader pool within [reader_threads, max_reader_threads] from the
  // sessions' diagnoses.
  bool autotune = false;
  int max_decode_threads = 0;  // 0: online cores.
  int max_reader_threads = 256;
  // Ring segments are labelled "<shm_prefix><session>" (memory files with
  // no name in the file system; /proc/<pid>/maps shows the label).
  std::string shm_prefix = "stoker.";
  FileSystem* fs = nullptr;  // nullptr: FileSystem::Default().
  // The largest file read whole (a sample's file, a manifest).
  uint64_t max_file_bytes = kDefaultMaxFileBytes;
  DecodeLimits decode_limits;  // Per image: pixels, scans, memory.
  ScanLimits scan_limits;      // Per folder scan (cancel: set by Stop()).
  // All rings together (bytes; 0: no limit), one non-admin user's rings
  // (0: no limit) and sessions per non-admin user (0: no limit), opening
  // ones included; checked before a ring is allocated. (stokerd's flags
  // make a 0 of the first two a share of the node's memory.)
  uint64_t max_ring_bytes = 0;
  uint64_t max_ring_bytes_per_user = 0;
  uint32_t max_sessions_per_user = 64;
  // A session whose client never attaches (Attach) within this is closed
  // and its ring reclaimed; zero: never.
  absl::Duration attach_timeout = absl::Seconds(60);
  // Group whose members are admins (besides the daemon's own user);
  // -1: none.
  int64_t admin_gid = -1;
  // Socket path the ring handoff listens on (server/daemon/ring_handoff.h), told
  // to clients in OpenSessionResponse; empty: only this process can take
  // rings (HandOffRing), as in-process tests do.
  std::string handoff_socket;
  absl::Duration reap_interval = absl::Milliseconds(250);
  // How long CloseSession waits for its session's close (its reads in
  // flight) before it answers and the close goes on by itself.
  absl::Duration close_wait = absl::Seconds(10);
};

// The reader threads one user may hold when the operator names no cap:
// all but an eighth of them (at least one kept for the others), so a user
// alone on the node reads at nearly full concurrency while reads blocked
// on its slow store never hold the threads other users' reads need.
inline int DefaultReaderCap(int reader_threads) {
  return reader_threads <= 1 ? 1 : reader_threads - std::max(1, reader_threads / 8);
}

}  // namespace stoker

#endif  // STOKER_SERVER_DAEMON_OPTIONS_H_
