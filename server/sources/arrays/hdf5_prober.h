// Runs the HDF5 reader (stoker-h5probe, server/h5probe/probe.cc) for the
// daemon: libhdf5 parses a trainer's file in that sandboxed process, never
// in the shared daemon, and answers where each dataset's bytes lie.
//
// A Prober starts one reader on first use and hands it files one at a time
// (the caller's descriptors, so one Prober serves one source's opener: a
// reader only ever sees one user's files). A reader that crashes, is
// killed by its system-call filter, hangs past the timeout or answers
// nonsense costs that file: DATA_LOSS naming what happened; the next file
// gets a fresh reader. The reader's program is, in order: SetProgram's
// (stokerd --hdf5-reader), $STOKER_H5PROBE, or stoker-h5probe beside the
// running executable.
//
// Thread-safe (files are described one at a time).
#ifndef STOKER_SERVER_SOURCES_ARRAYS_HDF5_PROBER_H_
#define STOKER_SERVER_SOURCES_ARRAYS_HDF5_PROBER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/h5probe/protocol.h"

namespace stoker {
namespace h5 {

class Prober {
 public:
  // Runs `program` (Program() unless given).
  explicit Prober(std::string program = Program()) : program_(std::move(program)) {}
  ~Prober();  // Kills the reader.
  Prober(const Prober&) = delete;
  Prober& operator=(const Prober&) = delete;

  static void SetProgram(const std::string& path);
  static std::string Program();

  // Describes `names` of the file open at `fd` (`size` bytes; `path` names
  // it in errors). One entry per name; the whole answer's errors are
  // DATA_LOSS (the reader failed), FAILED_PRECONDITION (it cannot run).
  absl::StatusOr<h5probe::Answer> Describe(int fd, uint64_t size,
                                           const std::vector<std::string>& names,
                                           const std::string& path);

  // Readers started and readers lost (crashed, killed or timed out), for
  // tests and stats.
  uint64_t started() const { return started_.load(); }
  uint64_t lost() const { return lost_.load(); }
  // How long a reader may take over one file.
  void set_timeout_ms(int ms) { timeout_ms_ = ms; }
  // The running reader's pid, or -1 (tests).
  pid_t pid() {
    absl::MutexLock lock(&mu_);
    return pid_;
  }

 private:
  absl::Status Start() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Kills and reaps the reader; says how it ended.
  std::string Stop() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string program_;
  absl::Mutex mu_;
  pid_t pid_ ABSL_GUARDED_BY(mu_) = -1;
  int sock_ ABSL_GUARDED_BY(mu_) = -1;
  int timeout_ms_ = 30000;
  std::atomic<uint64_t> started_{0}, lost_{0};
};

}  // namespace h5
}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_ARRAYS_HDF5_PROBER_H_
