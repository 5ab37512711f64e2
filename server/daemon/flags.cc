#include "server/daemon/flags.h"

#include <grp.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/internal/parse.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/daemon/flag_types.h"
#include "server/objstore/s3_address.h"
#include "shm/fd_passing.h"
#include "util/version.h"

ABSL_FLAG(std::string, socket, "/run/stoker/stoker.sock",
          "Unix socket to serve the control plane on; its folder is created "
          "if missing.");
ABSL_FLAG(int, threads, stoker::DaemonOptions().decode_threads,
          "Decode threads over all NUMA nodes, 0..4096; 0 = one per CPU this process "
          "may run on.");
ABSL_FLAG(std::string, numa, "auto",
          "Decode pools per NUMA node, threads pinned to the node's CPUs and "
          "sessions placed on their trainer's node: auto (when the machine "
          "has several nodes), on, off.");
ABSL_FLAG(std::string, numa_topology, "",
          "Nodes by hand instead of the machine's: CPU lists separated by "
          "';', e.g. 0-3;4-7 (to test or to split a node).");
ABSL_FLAG(bool, numa_spill, stoker::DaemonOptions().numa_spill,
          "Let a session whose node's decode pool is saturated use other "
          "nodes' idle decode threads.");
ABSL_FLAG(std::string, socket_mode, "0660",
          "Octal mode of the socket file: who may open sessions (owner and "
          "group by default).");
ABSL_FLAG(std::string, shm_prefix, stoker::DaemonOptions().shm_prefix,
          "Prefix of ring names (as /proc/<pid>/maps shows them: /memfd:<prefix>...).");
ABSL_FLAG(std::string, hdf5_reader, "",
          "The HDF5 reader program (stoker-h5probe), which parses HDF5 files in a "
          "sandbox; default: $STOKER_H5PROBE, else stoker-h5probe beside stokerd.");
ABSL_FLAG(int, reader_threads, stoker::DaemonOptions().reader_threads,
          "Reader threads: how many source reads may be outstanding.");
ABSL_FLAG(int, max_reader_threads_per_user, stoker::DaemonOptions().max_reader_threads_per_user,
          "Reader threads one user's sessions may hold at once, 0..4096 (the "
          "rest of their reads wait queued while other users' run); 0 = all but an eighth of "
          "--reader-threads, at least 1.");
ABSL_FLAG(stoker::ByteSize, max_read_bytes_in_flight,
          stoker::ByteSize{stoker::DaemonOptions().max_read_bytes_in_flight},
          "Bytes of source files being read at once, in all (half for one "
          "user; one read larger than that runs alone), charged by each "
          "file's size before it is read, until its decode is done; a larger "
          "file is RESOURCE_EXHAUSTED.");
ABSL_FLAG(stoker::ByteSize, max_decode_bytes_in_flight,
          stoker::ByteSize{stoker::DaemonOptions().max_decode_bytes_in_flight},
          "Bytes of pictures being decoded whose decode needs over 16 MiB, in all "
          "(half for one user), charged before the decode allocates.");
ABSL_FLAG(stoker::ByteSize, l1_bytes, stoker::ByteSize{stoker::DaemonOptions().l1_bytes},
          "L1 (RAM) cache of encoded samples, in bytes; 0 disables it.");
ABSL_FLAG(stoker::ByteSize, decoded_cache_bytes,
          stoker::ByteSize{stoker::DaemonOptions().decoded_cache_bytes},
          "RAM cache of finished val samples, in bytes; 0 disables it.");
ABSL_FLAG(stoker::ByteSize, pixel_cache_bytes,
          stoker::ByteSize{stoker::DaemonOptions().pixel_cache_bytes},
          "RAM cache of decoded pictures, in bytes: sessions keep their pictures "
          "exactly when they fit the user's share of it (automatic), or scaled "
          "to pixel_cache.max_side (those spill to L2 too when L2 is on).");
ABSL_FLAG(stoker::ByteSize, volume_cache_bytes,
          stoker::ByteSize{stoker::DaemonOptions().volume_cache_bytes},
          "RAM cache of chunked or compressed volumes (HDF5 volume folders), "
          "decoded whole once and shared by every session, in bytes; a volume "
          "larger than it is read by region (a warning says so).");
ABSL_FLAG(std::string, object_store_endpoints, "",
          "Object store endpoints (S3 API) sessions may reach, comma-separated "
          "http[s]://host[:port], and 'aws' for AWS's own S3 endpoints of every "
          "region (https only); empty: none. Only these are ever contacted, with "
          "each trainer's own credentials; a loopback or intranet endpoint only if "
          "listed here.");
ABSL_FLAG(bool, object_store_own_endpoints, stoker::DaemonOptions().object_store_own_endpoints,
          "Sessions of the daemon's own user reach the endpoint their client "
          "resolved from that user's own configuration (AWS_ENDPOINT_URL, a "
          "profile's endpoint_url, the region's), listed or not. Only for a daemon "
          "that serves one user (--owners-dir or --exit-with-pid, no "
          "--admin-group): the embedded daemon a trainer starts sets it.");
ABSL_FLAG(absl::Duration, object_store_deadline, stoker::DaemonOptions().object_store_deadline,
          "Longest one object store request may take, its time queued, its "
          "attempts and their backoff included (e.g. 2m; at most 10m); past it the sample "
          "read is DEADLINE_EXCEEDED and its reader thread free.");
ABSL_FLAG(stoker::ByteSize, object_store_low_speed,
          stoker::ByteSize{stoker::DaemonOptions().object_store_low_speed_bytes},
          "Bytes a second below which an object store request's attempt is "
          "abandoned as too slow (then retried within --object-store-deadline) "
          "once it stays below it for --object-store-low-speed-time; 0: no such "
          "speed.");
ABSL_FLAG(absl::Duration, object_store_low_speed_time,
          stoker::DaemonOptions().object_store_low_speed_time,
          "How long an object store request may stay below "
          "--object-store-low-speed, at least 1s.");
ABSL_FLAG(uint64_t, object_store_flat_listing, stoker::ScanLimits().flat_listing_objects,
          "An ImageFolder in an object store of at most about this many objects "
          "(at most 100000) is listed flat, page after page; a larger one class by "
          "class, in parallel, but for the classes its first flat pages hold whole "
          "(0: always class by class).");
ABSL_FLAG(std::string, l2_path, "",
          "Folder of the L2 LMDB cache on local disk; empty disables L2.");
ABSL_FLAG(stoker::ByteSize, l2_max_bytes, stoker::ByteSize{stoker::L2Options().max_bytes},
          "L2 map size (its maximum), e.g. 64G.");
ABSL_FLAG(uint32_t, l2_max_readers, stoker::L2Options().max_readers, "L2 LMDB reader slots.");
ABSL_FLAG(uint64_t, l2_writer_queue, stoker::L2Options().writer_queue,
          "Bounded L2 write queue; 0 = $L2_WRITER_QUEUE_MAX, else 4096. "
          "Writes beyond it are dropped and counted, never waited for.");
ABSL_FLAG(stoker::ByteSize, l2_writer_queue_bytes,
          stoker::ByteSize{stoker::L2Options().writer_queue_bytes},
          "Most bytes of values the L2 write queue holds (queued or being "
          "written); writes beyond it are dropped and counted, never waited for.");
ABSL_FLAG(std::string, metrics_address, "127.0.0.1:9464",
          "host:port for Prometheus /metrics (loopback by default; port 0 "
          "picks a free one, shown in stats); empty disables it.");
ABSL_FLAG(bool, autotune, stoker::DaemonOptions().autotune,
          "Resize the decode and reader pools from the sessions' diagnoses.");
ABSL_FLAG(int, max_decode_threads, stoker::DaemonOptions().max_decode_threads,
          "Upper bound for autotune's decode pool; 0 = online cores.");
ABSL_FLAG(int64_t, max_image_pixels, stoker::DecodeLimits().max_pixels,
          "Largest image decoded (width x height, from its header); larger "
          "samples fail with a resource error before any allocation.");
ABSL_FLAG(int, max_progressive_scans, stoker::DecodeLimits().max_scans,
          "Most scans a progressive JPEG may have.");
ABSL_FLAG(stoker::ByteSize, max_decode_bytes,
          stoker::ByteSize{uint64_t(stoker::DecodeLimits().max_bytes)},
          "Most memory one image's decode may need (estimated from its "
          "header: progressive coefficients plus output).");
ABSL_FLAG(uint64_t, max_dataset_files, stoker::ScanLimits().max_files,
          "Most directory entries a folder dataset's scan may see, and most "
          "lines of a manifest.");
ABSL_FLAG(stoker::ByteSize, max_file_bytes, stoker::ByteSize{stoker::kDefaultMaxFileBytes},
          "Largest file read whole (a sample's file, a manifest); a larger one "
          "is that sample's error (RESOURCE_EXHAUSTED), checked before any "
          "memory is allocated.");
ABSL_FLAG(absl::Duration, dataset_scan_timeout, stoker::ScanLimits().max_time,
          "Longest a dataset's scan or listing may take, and longest object "
          "store shards being indexed may complete no block (e.g. 10m, 90s).");
ABSL_FLAG(absl::Duration, proof_lifetime, stoker::ScanLimits().proof_lifetime,
          "How long a file a session's own open proved it may read is served from "
          "the caches without being opened again (a revocation bites within it); "
          "0 = every read opens the file.");
ABSL_FLAG(stoker::ByteSize, max_ring_bytes,
          stoker::ByteSize{stoker::DaemonOptions().max_ring_bytes},
          "Most memory all sessions' rings may take together; 0 = half of "
          "the node's memory.");
ABSL_FLAG(stoker::ByteSize, max_ring_bytes_per_user,
          stoker::ByteSize{stoker::DaemonOptions().max_ring_bytes_per_user},
          "Most memory one user's rings may take together (admins are not "
          "limited); 0 = a quarter of --max-ring-bytes.");
ABSL_FLAG(absl::Duration, attach_timeout, stoker::DaemonOptions().attach_timeout,
          "A session whose client has not attached within this is closed "
          "and its ring reclaimed; 0 = never.");
ABSL_FLAG(stoker::ByteSize, max_array_bytes_per_user,
          stoker::ByteSize{stoker::DaemonOptions().max_array_bytes_per_user},
          "Most RAM one user's npy/HDF5 sources may hold (RAM copies, "
          "datasets read whole; all users together: --l1-bytes); past it "
          "they read from their files; 0 = a quarter of --l1-bytes.");
ABSL_FLAG(stoker::ByteSize, max_list_bytes_per_user,
          stoker::ByteSize{stoker::DaemonOptions().max_list_bytes_per_user},
          "Most RAM one user's open datasets' sample lists (paths, names) may "
          "take together; a dataset whose list would pass it is refused "
          "(RESOURCE_EXHAUSTED) while it is being built.");
ABSL_FLAG(uint64_t, max_open_files_per_user, stoker::DaemonOptions().max_open_files_per_user,
          "Files one user's sources may keep open or mapped together (a "
          "folder of .npy or HDF5 files holds one each); past it the next "
          "is RESOURCE_EXHAUSTED. All users together: three quarters of the "
          "descriptor limit and of vm.max_map_count, whichever is lower.");
ABSL_FLAG(uint32_t, max_sessions_per_user, stoker::DaemonOptions().max_sessions_per_user,
          "Most open sessions per user (admins are not limited); 0 = no "
          "limit.");
ABSL_FLAG(std::string, admin_group, "",
          "Group whose members may resize pools, warm caches, and see and "
          "close every session (the daemon's own user always may; root only as a member); "
          "others see and close only their own sessions.");
ABSL_FLAG(bool, allow_root, false,
          "Serve as root. Refused otherwise: a root daemon reads any file for "
          "any user of its socket. (Embedded daemons, bound to their owner by "
          "--exit-with-pid or --owners-dir, serve only that user.)");
ABSL_FLAG(bool, allow_core_dumps, false,
          "Leave the daemon dumpable: core dumps, and ptrace or /proc/<pid>/mem "
          "by its own user. Off by default: its memory holds trainers' "
          "object-store credentials and their batches.");
ABSL_FLAG(int, exit_with_pid, 0,
          "Shut down when this process exits (used by embedded daemons that "
          "a trainer starts for itself); 0 = never.");
ABSL_FLAG(std::string, owners_dir, "",
          "Folder of files named by the pids of the processes using this "
          "daemon (the Python package's shared embedded daemon): files of "
          "dead processes are removed, and the daemon shuts down when none "
          "is left. Empty = not used.");

namespace stoker {

bool ParseFlags(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Stoker daemon: decodes datasets into shared-memory batch rings.\n"
      "usage: stokerd [--socket PATH] [--threads N] [flags]\n"
      "Flags are written with dashes (--l1-bytes); sizes take units (2G, "
      "512M). The flags below are listed with absl's underscores.");
  absl::FlagsUsageConfig usage_config;
  usage_config.version_string = [] {
    return absl::StrCat("stokerd ", kVersion, " (", kBuildType, ")\n");
  };
  // --help lists this file's flags (absl's default: the flags of files
  // named like the program).
  usage_config.contains_help_flags = [](absl::string_view file) {
    return absl::EndsWith(file, "server/daemon/flags.cc");
  };
  usage_config.contains_helpshort_flags = usage_config.contains_help_flags;
  absl::SetFlagsUsageConfig(usage_config);
  static std::vector<std::string> respelled;  // Owns rewritten argv entries.
  NormalizeFlagSpelling("stokerd", argc, argv, &respelled);
  // absl's own handling exits 1 after --help; asking for help is no error.
  absl::flags_internal::ParseCommandLineImpl(
      argc, argv, absl::flags_internal::ArgvListAction::kRemoveParsedArgs,
      absl::flags_internal::UsageFlagsAction::kIgnoreUsage,
      absl::flags_internal::OnUndefinedFlag::kAbortIfUndefined);
  return absl::flags_internal::HandleUsageFlags(std::cout, absl::ProgramUsageMessage()) >= 0;
}

absl::StatusOr<StokerdConfig> Config() {
  StokerdConfig config;
  config.socket = absl::GetFlag(FLAGS_socket);
  config.allow_root = absl::GetFlag(FLAGS_allow_root);
  config.allow_core_dumps = absl::GetFlag(FLAGS_allow_core_dumps);
  config.exit_with_pid = absl::GetFlag(FLAGS_exit_with_pid);
  config.owners_dir = absl::GetFlag(FLAGS_owners_dir);
  if (geteuid() == 0 && !config.allow_root && config.exit_with_pid <= 0 &&
      config.owners_dir.empty()) {
    return absl::FailedPreconditionError(
        "refusing to run as root: a root daemon would read any file for any user "
        "of its socket. Run it as an unprivileged user (the systemd unit uses "
        "User=stoker), or pass --allow-root.");
  }
  config.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  config.hdf5_reader = absl::GetFlag(FLAGS_hdf5_reader);
  const std::string mode_text = absl::GetFlag(FLAGS_socket_mode);
  char* end = nullptr;
  const long mode = std::strtol(mode_text.c_str(), &end, 8);
  if (mode_text.empty() || *end != '\0' || mode < 0 || mode > 0777) {
    return absl::InvalidArgumentError("--socket-mode must be octal, like 0660");
  }
  config.socket_mode = static_cast<mode_t>(mode);
  if (absl::GetFlag(FLAGS_threads) < 0 || absl::GetFlag(FLAGS_threads) > 4096) {
    return absl::InvalidArgumentError("--threads must be in 0..4096 (0: one per CPU)");
  }
  DaemonOptions& options = config.daemon;
  options.decode_threads = absl::GetFlag(FLAGS_threads);
  if (const std::string numa = absl::GetFlag(FLAGS_numa); numa == "auto") {
    options.numa = NumaMode::kAuto;
  } else if (numa == "on") {
    options.numa = NumaMode::kOn;
  } else if (numa == "off") {
    options.numa = NumaMode::kOff;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--numa must be auto, on or off, got '", numa, "'"));
  }
  options.numa_topology = absl::GetFlag(FLAGS_numa_topology);
  options.numa_spill = absl::GetFlag(FLAGS_numa_spill);
  options.shm_prefix = absl::GetFlag(FLAGS_shm_prefix);
  options.reader_threads = absl::GetFlag(FLAGS_reader_threads);
  options.max_reader_threads_per_user = absl::GetFlag(FLAGS_max_reader_threads_per_user);
  options.max_read_bytes_in_flight = absl::GetFlag(FLAGS_max_read_bytes_in_flight).bytes;
  options.max_decode_bytes_in_flight = absl::GetFlag(FLAGS_max_decode_bytes_in_flight).bytes;
  if (options.max_reader_threads_per_user < 0 || options.max_reader_threads_per_user > 4096) {
    return absl::InvalidArgumentError(
        "--max-reader-threads-per-user must be in 0..4096 (0: all but an eighth of "
        "--reader-threads)");
  }
  options.l1_bytes = absl::GetFlag(FLAGS_l1_bytes).bytes;
  options.decoded_cache_bytes = absl::GetFlag(FLAGS_decoded_cache_bytes).bytes;
  options.pixel_cache_bytes = absl::GetFlag(FLAGS_pixel_cache_bytes).bytes;
  options.volume_cache_bytes = absl::GetFlag(FLAGS_volume_cache_bytes).bytes;
  options.object_store_endpoints = absl::GetFlag(FLAGS_object_store_endpoints);
  options.object_store_own_endpoints = absl::GetFlag(FLAGS_object_store_own_endpoints);
  if (options.object_store_own_endpoints &&
      ((config.exit_with_pid <= 0 && config.owners_dir.empty()) ||
       !absl::GetFlag(FLAGS_admin_group).empty())) {
    // Its admins are then its own user alone: no one else's session may
    // reach what that user's configuration names.
    return absl::InvalidArgumentError(
        "--object-store-own-endpoints is for a daemon that serves one user "
        "(--owners-dir or --exit-with-pid, and no --admin-group); a node service lists "
        "its endpoints with --object-store-endpoints");
  }
  if (absl::StatusOr<EndpointAllowList> e =
          EndpointAllowList::Parse(options.object_store_endpoints);
      !e.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--object-store-endpoints: ", e.status().message()));
  }
  options.object_store_deadline = absl::GetFlag(FLAGS_object_store_deadline);
  if (options.object_store_deadline <= absl::ZeroDuration() ||
      options.object_store_deadline > absl::Minutes(10)) {
    // Every attempt of a request carries the signature made at its start,
    // which a store takes for 15 minutes.
    return absl::InvalidArgumentError("--object-store-deadline must be positive and at most 10m");
  }
  options.object_store_low_speed_bytes = absl::GetFlag(FLAGS_object_store_low_speed).bytes;
  options.object_store_low_speed_time = absl::GetFlag(FLAGS_object_store_low_speed_time);
  if (options.object_store_low_speed_bytes > 0 &&
      options.object_store_low_speed_time < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--object-store-low-speed-time must be at least 1s");
  }
  options.l2.path = absl::GetFlag(FLAGS_l2_path);
  options.l2.max_bytes = absl::GetFlag(FLAGS_l2_max_bytes).bytes;
  if (!options.l2.path.empty() && options.l2.max_bytes < (1ULL << 20)) {
    return absl::InvalidArgumentError(
        "--l2-max-bytes must be at least 1M when --l2-path is set (it is the L2 "
        "cache's size)");
  }
  options.l2.max_readers = absl::GetFlag(FLAGS_l2_max_readers);
  options.l2.writer_queue = absl::GetFlag(FLAGS_l2_writer_queue);
  options.l2.writer_queue_bytes = absl::GetFlag(FLAGS_l2_writer_queue_bytes).bytes;
  options.autotune = absl::GetFlag(FLAGS_autotune);
  options.max_decode_threads = absl::GetFlag(FLAGS_max_decode_threads);
  if (const std::string group = absl::GetFlag(FLAGS_admin_group); !group.empty()) {
    const struct group* g = getgrnam(group.c_str());
    if (g == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--admin-group ", group, ": no such group"));
    }
    options.admin_gid = g->gr_gid;
  }
  options.max_ring_bytes = absl::GetFlag(FLAGS_max_ring_bytes).bytes;
  if (options.max_ring_bytes == 0) {
    // Rings are memory files (shm/segment.h), not /dev/shm's.
    options.max_ring_bytes =
        uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE)) / 2;
  }
  options.max_sessions_per_user = absl::GetFlag(FLAGS_max_sessions_per_user);
  options.max_ring_bytes_per_user = absl::GetFlag(FLAGS_max_ring_bytes_per_user).bytes;
  if (options.max_ring_bytes_per_user == 0) {
    options.max_ring_bytes_per_user = options.max_ring_bytes / 4;
  }
  options.attach_timeout = absl::GetFlag(FLAGS_attach_timeout);
  options.max_array_bytes_per_user = absl::GetFlag(FLAGS_max_array_bytes_per_user).bytes;
  options.max_list_bytes_per_user = absl::GetFlag(FLAGS_max_list_bytes_per_user).bytes;
  options.max_open_files_per_user = absl::GetFlag(FLAGS_max_open_files_per_user);
  if (options.max_array_bytes_per_user == 0) {
    options.max_array_bytes_per_user = options.l1_bytes / 4;
  }
  options.scan_limits.max_files = absl::GetFlag(FLAGS_max_dataset_files);
  options.scan_limits.flat_listing_objects = absl::GetFlag(FLAGS_object_store_flat_listing);
  options.max_file_bytes = absl::GetFlag(FLAGS_max_file_bytes).bytes;
  if (options.max_read_bytes_in_flight < options.max_file_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-read-bytes-in-flight (", options.max_read_bytes_in_flight,
        " bytes) must be at least --max-file-bytes (", options.max_file_bytes,
        "): every file a source may read must fit among the reads in flight"));
  }
  options.scan_limits.max_time = absl::GetFlag(FLAGS_dataset_scan_timeout);
  options.scan_limits.proof_lifetime = absl::GetFlag(FLAGS_proof_lifetime);
  if (options.scan_limits.proof_lifetime < absl::ZeroDuration() ||
      options.scan_limits.proof_lifetime > absl::Hours(24)) {
    return absl::InvalidArgumentError(
        "--proof-lifetime must be 0..24h: past it a revocation would never bite");
  }
  options.decode_limits.max_pixels = absl::GetFlag(FLAGS_max_image_pixels);
  options.decode_limits.max_scans = absl::GetFlag(FLAGS_max_progressive_scans);
  options.decode_limits.max_bytes =
      static_cast<int64_t>(absl::GetFlag(FLAGS_max_decode_bytes).bytes);
  if (options.decode_limits.max_pixels < 1 || options.decode_limits.max_scans < 1 ||
      options.decode_limits.max_bytes < (1 << 20)) {
    return absl::InvalidArgumentError(
        "--max-image-pixels and --max-progressive-scans must be >= 1, "
        "--max-decode-bytes >= 1M");
  }
  if (options.max_decode_bytes_in_flight < uint64_t(options.decode_limits.max_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-decode-bytes-in-flight (", options.max_decode_bytes_in_flight,
        " bytes) must be at least --max-decode-bytes (", options.decode_limits.max_bytes,
        "): every decode must fit among the decodes in flight"));
  }
  // Rings reach clients as descriptors over this socket (next to the
  // control socket, same mode): segments stay 0600 and the daemon's.
  options.handoff_socket = shm::RingSocketPath(config.socket);
  if (options.scan_limits.flat_listing_objects > 100'000) {
    // Flat pages come one after another: a long listing is by class.
    return absl::InvalidArgumentError("--object-store-flat-listing must be at most 100000");
  }
  if (options.reader_threads < 1 || options.reader_threads > 4096) {
    return absl::InvalidArgumentError("--reader-threads must be in 1..4096");
  }
  return config;
}

}  // namespace stoker
