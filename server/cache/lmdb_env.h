// A small RAII wrapper over one LMDB environment and its main database,
// with every LMDB error turned into an absl::Status (mdb_strerror text).
//
// Thread-safety: the environment is opened with MDB_NOTLS, so Get and
// ForEach may run on any number of threads at once (each uses its own
// read-only transaction). Writes go through WriteTxn, one at a time (LMDB
// serializes writers). Destroying the env while calls are running is a bug.
#ifndef STOKER_SERVER_CACHE_LMDB_ENV_H_
#define STOKER_SERVER_CACHE_LMDB_ENV_H_

#include <lmdb.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "util/mapped_read.h"

namespace stoker {

// MDB_NOTFOUND -> NOT_FOUND, MDB_MAP_FULL -> RESOURCE_EXHAUSTED, errno
// values as ErrnoStatus, anything else INTERNAL; "<what>: <mdb_strerror>".
absl::Status LmdbStatus(int rc, absl::string_view what);

class LmdbEnv {
 public:
  struct Options {
    bool read_only = true;
    uint64_t map_bytes = 0;    // Writable envs: the map size (max DB size).
    uint32_t max_readers = 126;
    // Read-only envs: the data file already opened (confined) by the caller,
    // who keeps and closes it. The env maps that file (through
    // /proc/self/fd) with MDB_NOSUBDIR | MDB_NOLOCK: no path is resolved
    // and no lock file is opened or written.
    int data_fd = -1;
  };

  // Opens (and for writable envs creates) the environment in folder `path`
  // (or the data file `path`), created files mode 0600.
  static absl::StatusOr<std::unique_ptr<LmdbEnv>> Open(const std::string& path,
                                                       const Options& options);
  ~LmdbEnv();

  // Copies the value of `key` into *out. NOT_FOUND when absent,
  // RESOURCE_EXHAUSTED (before anything is allocated) when it is over
  // `max_bytes`.
  absl::Status Get(absl::string_view key, std::string* out,
                   uint64_t max_bytes = UINT64_MAX) const;
  // Calls fn with the value of `key` in place (valid only during the call,
  // inside a read transaction). NOT_FOUND when absent.
  absl::Status View(absl::string_view key,
                    const std::function<void(absl::string_view)>& fn) const;

  // Calls fn(key, value) for every entry in key order, in one read
  // transaction; stops early when fn returns false. For the daemon's own
  // environments: the values are read in place, unguarded.
  absl::Status ForEach(
      const std::function<bool(absl::string_view, absl::string_view)>& fn) const;
  // Calls fn(key) for every key in order, in one read transaction. The keys
  // are copied out in batches under the SIGBUS guard (util/mapped_read.h)
  // when the data file is another user's, so a file cut short mid-walk is
  // DATA_LOSS, not the daemon's end; fn runs outside the guard and stops
  // the walk by returning false.
  absl::Status ForEachKey(const std::function<bool(absl::string_view)>& fn) const;

  // Puts and deletes in one write transaction. `fn` receives the txn and the
  // dbi; its status aborts the transaction when not OK.
  absl::Status WriteTxn(const std::function<absl::Status(MDB_txn*, MDB_dbi)>& fn);

  // Entries in the main database and bytes of the map in use (its high
  // water mark: pages freed since stay counted).
  void Usage(uint64_t* entries, uint64_t* bytes) const;
  // Entries and bytes of the main database's live pages (branch, leaf and
  // overflow; freed pages not counted).
  void LiveUsage(uint64_t* entries, uint64_t* bytes) const;

  // Clears reader slots of dead processes; returns how many.
  int ReaderCheck();
  size_t max_key_size() const;
  const std::string& path() const { return path_; }

 private:
  LmdbEnv(std::string path, MDB_env* env, MDB_dbi dbi, bool guarded)
      : path_(std::move(path)), env_(env), dbi_(dbi), guarded_(guarded) {}

  const std::string path_;
  MDB_env* const env_;
  const MDB_dbi dbi_;
  // Opened from a caller's data file (data_fd): Get reads under
  // GuardedMappedRead, as the file's owner may truncate it.
  const bool guarded_;
  // Runs `fn` under the SIGBUS guard when the data file is another user's
  // (guarded_), else as is.
  template <typename Fn>
  absl::Status Reading(Fn& fn) const {
    if (guarded_) return GuardedMappedRead(path_, fn);
    fn();
    return absl::OkStatus();
  }
};

}  // namespace stoker

#endif  // STOKER_SERVER_CACHE_LMDB_ENV_H_
