// The Stoker C++ client: connects to stokerd over its Unix socket, opens
// sessions, and reads batches zero-copy from each session's shared-memory
// ring.
//
// Ownership: a Client owns its gRPC channel; a Session owns its ring mapping
// and its Attach stream (the daemon's signal that this process is alive).
// A Batch is a cheap, copyable handle on one ring slot: the slot stays
// reserved for the application while any copy of the Batch is alive and
// goes back to the daemon when the last copy is destroyed. Batches may
// outlive their Session (the mapping stays until the last one goes).
//
// Thread-safety: Client methods are thread-safe. A Session's Next() must be
// called from one thread at a time; Batch handles may be released from any
// thread.
#ifndef STOKER_CLIENT_CPP_CLIENT_H_
#define STOKER_CLIENT_CPP_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/stoker.pb.h"

namespace stoker {

class SessionCore;  // Ring mapping + attach stream; defined in client.cc.
class DaemonConnection;  // client/cpp/daemon_connection.h
class Session;

// One named field of a batch: samples() x shape elements of dtype.
struct BatchField {
  std::string_view name;
  const void* data = nullptr;   // samples() * sample_bytes bytes.
  uint32_t dtype = 0;           // shm::DType (shm/ring_data.h).
  std::vector<uint64_t> shape;  // Per sample, row-major.
  uint64_t sample_bytes = 0;
  uint64_t size_bytes = 0;      // Of the valid samples.
  // The same bytes in the batch's slab (SessionSpec.slabs): a device
  // address for slabs in GPU memory. Null without slabs, and in a private
  // copy (its slab went back with its slot). The slab goes back with the
  // batch: finish the GPU work that reads it first (the daemon writes it
  // next).
  void* slab = nullptr;
};

class Batch {
 public:
  Batch() = default;

  // The session's fields, in the order its spec declared them (the
  // presets: "image" then "label").
  int field_count() const;
  BatchField field(int i) const;       // 0 <= i < field_count().
  int FindField(std::string_view name) const;  // -1 when absent.

  // Shortcuts for the first field (the presets' image: uint8 [H, W, C], or
  // a float dtype's [C, H, W] normalized).
  const uint8_t* data() const;
  uint32_t dtype() const;
  uint64_t size_bytes() const;
  uint64_t sample_bytes() const;
  uint32_t samples() const;      // Valid samples (short at an epoch's end).
  // The "label" field when it is int32, else null.
  const int32_t* labels() const;   // [samples()]
  const uint32_t* status() const;  // [samples()], 0 = OK (see ring_data.h)
  const uint64_t* indices() const; // [samples()], dataset sample indices
  uint32_t error_count() const;
  uint64_t epoch() const;
  uint64_t batch_index() const;  // Within the epoch.
  uint64_t sequence() const;     // Counted from the session's start.
  // Start and length of the whole ring mapping (for pinning once). A
  // private copy's data lie outside it, in pageable memory of its own.
  const void* mapping_base() const;
  uint64_t mapping_size() const;
  // A private copy (Session::Next): holds no ring slot.
  bool copied() const;

  explicit operator bool() const { return lease_ != nullptr; }

 private:
  friend class Session;
  struct Lease;
  std::shared_ptr<const Lease> lease_;
};

class Session {
 public:
  ~Session();  // Closes the session (best effort) and ends its stream.

  // Waits for the next batch in order. When the daemon dies or restarts
  // (not when the session is closed), reconnects to the same socket for up
  // to resume_window() and goes on with the next undelivered batch of a new
  // session with the same spec: the same data as without the restart.
  // With on_error ON_ERROR_RAISE, a batch with a failed sample is not
  // returned: DATA_LOSS names the sample's file (the next call goes on with
  // the next batch). UNAVAILABLE when the daemon closed the session or did
  // not come back,
  // DEADLINE_EXCEEDED after `timeout`. A batch taken while the application
  // holds every other ring slot comes as a private copy (Batch::copied()):
  // its slot goes back at once, so batches held for long (a list of a
  // whole epoch) never stall the ring. The session's first such copy
  // writes one warning to stderr. FAILED_PRECONDITION when every slot is
  // held all the same (a copy's memory could not be had).
  absl::StatusOr<Batch> Next(absl::Duration timeout = absl::InfiniteDuration());
  // Next() within one pass over `epoch`: OUT_OF_RANGE, taking nothing, when
  // the next batch is of a later epoch. A pass ends so where the batches
  // per epoch are not known yet (a streamed opening).
  absl::StatusOr<Batch> NextInEpoch(uint64_t epoch,
                                    absl::Duration timeout = absl::InfiniteDuration());

  // The files behind dataset sample indices (Batch::indices()) of this
  // session, e.g. to report failed samples.
  absl::StatusOr<std::vector<std::string>> DescribeSamples(
      const std::vector<uint64_t>& indices);
  // The same indices in full: each sample's files, and for typed arrays
  // their shapes and (NIfTI) affines (v1::SampleFiles, per index).
  absl::StatusOr<v1::DescribeSamplesResponse> Describe(const std::vector<uint64_t>& indices);

  // How long Next() tries to reconnect (default 60 s; zero: never).
  void set_resume_window(absl::Duration d) { resume_window_ = d; }
  uint64_t reconnects() const { return reconnects_; }

  // Closes the session in the daemon now; Next() then fails with
  // FAILED_PRECONDITION. Batches still held stay readable. (A session closed
  // by the daemon or an operator delivers the batches already in its ring,
  // then fails with UNAVAILABLE.)
  absl::Status Close();

  uint64_t id() const;  // Changes when the session was resumed.

  // Client decode (SessionSpec.client_decode). The share of each batch the
  // daemon decodes itself, 0..1 (clamped), from the next batch it starts;
  // kept across a resume. And what the daemon reports of its own decoding
  // for this session: samples, their decode + transform time summed over
  // threads, the decode threads this session can count on (its fair part
  // of its node's pool), the share in effect.
  void SetCpuShare(double share);
  struct DaemonDecode {
    uint64_t samples = 0;
    uint64_t nanos = 0;
    uint32_t threads = 0;
    double share = 0;
  };
  DaemonDecode daemon_decode() const;
  const v1::OpenSessionResponse& info() const;
  // This rank's batches per epoch: the answer's, or for a session whose
  // dataset's opening streams (SessionSpec.streamed_opening; the answer's
  // 0) the ring's once the opening ended, 0 before.
  uint64_t batches_per_epoch() const;
  // batches_per_epoch(), waiting up to `timeout` for a streamed opening to
  // end; the session's failure (its code and message, e.g. DATA_LOSS
  // naming a shard) when it failed, UNAVAILABLE when the daemon went away,
  // DEADLINE_EXCEEDED after `timeout`.
  absl::StatusOr<uint64_t> WaitBatchesPerEpoch(
      absl::Duration timeout = absl::InfiniteDuration());

 private:
  friend class Client;
  Session(std::shared_ptr<SessionCore> core, std::string socket_path,
          v1::SessionSpec spec);
  absl::StatusOr<Batch> NextFromRing(absl::Duration timeout, uint64_t last_epoch);
  absl::StatusOr<Batch> NextUpTo(uint64_t last_epoch, absl::Duration timeout);
  bool Resumable(const absl::Status& s) const;
  absl::Status FailedSamplesError(const Batch& b);
  absl::Status Reconnect(absl::Time deadline);

  std::shared_ptr<SessionCore> core_;
  const std::string socket_path_;
  const v1::SessionSpec spec_;
  uint64_t next_sequence_ = 0;
  bool closed_ = false;
  bool delivered_any_ = false;
  bool copy_warned_ = false;
  uint64_t last_epoch_ = 0, last_batch_ = 0;  // Of the last batch delivered.
  absl::Duration resume_window_ = absl::Seconds(60);
  uint64_t reconnects_ = 0;
  double share_ = -1;  // Set by SetCpuShare; -1: the spec's.
};

class Client {
 public:
  // Connects to unix:`socket_path`, waiting up to `timeout` for the daemon
  // (client/cpp/daemon_connection.h: the checks). PERMISSION_DENIED (naming
  // the socket) when this user may not use it, UNAVAILABLE when nothing
  // answers. A later call that finds the daemon gone or restarted (in a
  // new folder, or with its tokens forgotten) connects afresh, checked
  // again, and is made once more.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(
      const std::string& socket_path,
      absl::Duration timeout = absl::Seconds(5));
  ~Client();

  // Opens a session and maps its ring. Errors are the daemon's (see
  // proto/stoker.proto), with the daemon's message.
  absl::StatusOr<std::unique_ptr<Session>> OpenSession(
      const v1::SessionSpec& spec);
  absl::StatusOr<v1::DaemonStats> GetStats();
  // Starts a background warm-up of a dataset into the daemon's caches;
  // progress is in GetStats().warm_jobs.
  absl::StatusOr<v1::WarmCacheResponse> WarmCache(
      const v1::WarmCacheRequest& request);
  absl::Status CloseSession(uint64_t session_id);
  // `node` >= 0: only that NUMA node's decode pool.
  absl::StatusOr<v1::ResizePoolResponse> ResizePool(const std::string& pool,
                                                    uint32_t threads, int node = -1);
  absl::StatusOr<v1::ListSessionsResponse> ListSessions();
  // grpc.health.v1 Check for the whole server: OK when SERVING.
  absl::Status CheckHealth();

  const std::string& socket_path() const;

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  static absl::StatusOr<std::unique_ptr<Session>> OpenOn(const DaemonConnection& c,
                                                         const v1::SessionSpec& spec);
  static absl::Status CloseOn(const DaemonConnection& c, uint64_t session_id);
  std::unique_ptr<Impl> impl_;
};

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_CLIENT_H_
