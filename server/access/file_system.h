// The confined file environment: the only way any source reaches a file
// (LevelDB's Env). Every open goes through OpenConfined, which
//   - resolves a confined caller's path in the folder it proved it can open
//     (shm::OpenInFolder: no ".." and no magic links; symlinks are followed
//     as the caller's own open follows them);
//   - opens non-blocking and accepts regular files only (a FIFO, a device
//     or a socket is FAILED_PRECONDITION, never a blocked thread);
//   - refuses, for confined callers, the daemon's own files (FileGuard:
//     files its non-root uid owns, /dev/shm, its cache and socket folders);
// and whole-file reads are capped before any allocation (RESOURCE_EXHAUSTED
// for a larger file, a sparse one included).
//
// FileSystem is the interface sources read through, so tests and benchmarks
// can inject latency, errors and short reads. Implementations are
// thread-safe: every reader thread calls them concurrently.
#ifndef STOKER_SERVER_ACCESS_FILE_SYSTEM_H_
#define STOKER_SERVER_ACCESS_FILE_SYSTEM_H_

#include <sys/stat.h>

#include <atomic>
#include <functional>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace stoker {
namespace shm {
class OpenChannel;  // shm/open_channel.h
}  // namespace shm

// The daemon's own things that no confined caller may read, whatever folder
// it hands over. Immutable once built; shared by every confinement.
struct FileGuard {
  // Files owned by this uid are refused (-1: no such rule). A non-root
  // daemon's uid; a root daemon has none, or every root-owned dataset would
  // be refused, and relies on the rules below.
  int64_t daemon_uid = -1;
  // Whole file systems refused (st_dev): /dev/shm, where the rings live.
  std::vector<uint64_t> devices;
  // Files and folders refused by identity (st_dev, st_ino): the L2 cache's
  // files, the socket's folder, and any file beneath a refused folder is
  // refused through the device or owner rule.
  std::vector<std::pair<uint64_t, uint64_t>> inodes;

  // PERMISSION_DENIED naming `path` when `st` is one of the above.
  absl::Status Check(const struct stat& st, const std::string& path) const;
};

// A dataset's confinement: paths below `prefix` are opened relative to the
// folder the client opened, never through `..`; a symlink leads where it
// leads, as in the caller's own open (shm::OpenInFolder), and the file it
// reaches is checked as any other. With an `opener` (the daemon's confinements
// always have one) every open is the caller's own: its client opens the
// file with its own rights and hands the descriptor over
// (shm/open_channel.h), so the kernel decides what the caller may read.
// Without one (in-process tests of the rules) files are opened beneath
// `dir_fd` with this process's rights, as a client would open them
// (Authorizer::Confine never makes a confinement without an opener).
// Owns dir_fd.
struct Beneath {
  int dir_fd = -1;
  std::string prefix;  // The folder's path as the dataset names it.
  std::shared_ptr<const FileGuard> guard;  // May be null (no guard).
  std::shared_ptr<shm::OpenChannel> opener;  // May be null (see above).
  // Counts what a source keeps open of the caller's files (a mapping, an
  // open HDF5 file: each a descriptor or a map of the daemon's, which a
  // folder of many files could exhaust for everyone): called with 1 for
  // each, it gives a token held as long as that is, or null when the
  // caller holds its share already. Null: not counted.
  std::function<std::shared_ptr<void>(uint64_t)> charge_held;
  ~Beneath();
};

// A token of beneath->charge_held for one file kept open as `path`
// (null token when not counted); RESOURCE_EXHAUSTED naming the limit when
// the caller holds its share already.
absl::StatusOr<std::shared_ptr<void>> ChargeHeld(const Beneath* beneath, const std::string& path);

// What identifies one version of a file's contents, and the file.
struct FileVersion {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t device = 0;  // st_dev and st_ino: which file (0: not known).
  uint64_t inode = 0;
  // The inode's change time: no user can set it (an owner sets mtime), so
  // a recycled inode given another file's size and mtime still differs.
  int64_t ctime_ns = 0;
  // The same contents as far as size, mtime and ctime tell (what L2
  // records).
  bool operator==(const FileVersion& o) const {
    return size == o.size && mtime_ns == o.mtime_ns && ctime_ns == o.ctime_ns;
  }
  // The same file (device, inode) at the same version.
  bool SameFileAs(const FileVersion& o) const {
    return *this == o && device == o.device && inode == o.inode;
  }
};

FileVersion VersionOf(const struct stat& st);

// The default cap on a whole-file read (a sample, a manifest).
inline constexpr uint64_t kDefaultMaxFileBytes = 1ULL << 30;

// Opens `path` with `flags` (O_RDONLY or O_PATH; O_CLOEXEC, and O_NONBLOCK
// and O_NOCTTY for reads, are added), confined to `beneath` if set, and
// checks the file (rules above); `*st` (may be null) receives its stat.
// PERMISSION_DENIED for a path outside its folder (lexically, or through
// "..") or a guarded file; FAILED_PRECONDITION for a file that is not regular. The
// caller closes the descriptor.
absl::StatusOr<int> OpenConfined(const std::string& path, uint64_t flags,
                                 const Beneath* beneath,
                                 struct stat* st = nullptr);

// The entries of folder `path` (names without "." and ".."), sorted, the
// folder opened as OpenConfined opens a file (beneath `beneath`, which
// `path` may itself be; the guard's rules) but as a folder. NOT_FOUND,
// PERMISSION_DENIED, FAILED_PRECONDITION (not a folder), RESOURCE_EXHAUSTED
// past `max_entries`, each naming the path.
absl::StatusOr<std::vector<std::string>> ListFolder(const std::string& path,
                                                    const Beneath* beneath,
                                                    uint64_t max_entries);
// One entry of a folder, and what it is: a symlink (or an entry whose type
// the file system does not say) is what it leads to, opened as the
// caller's files are opened: kOutside when the opener refused it as
// leading outside (a client of an earlier release, which resolves beneath
// the folder), kFile when the caller may not open it (listed, as
// ImageFolder lists it; its read is refused), kOther when broken or
// something else.
struct FolderEntry {
  enum Kind { kFile, kFolder, kOutside, kOther };
  std::string name;
  Kind kind = kOther;
};
// ListFolder with each entry's kind; *folder_st (may be null) receives the
// folder's own stat.
absl::StatusOr<std::vector<FolderEntry>> ListFolderEntries(const std::string& path,
                                                           const Beneath* beneath,
                                                           uint64_t max_entries,
                                                           struct stat* folder_st = nullptr);
// The path of entry `name` of folder `folder` (which may end in '/').
std::string InFolder(const std::string& folder, const std::string& name);
// The first `n` bytes of `path` (fewer when it is shorter), opened as
// OpenConfined opens it, with its errors: what a folder's file holds when
// its name does not say (util/file_kinds.h).
absl::StatusOr<std::string> ReadHead(const std::string& path, const Beneath* beneath, size_t n);

// Reads [offset, offset + n) of the open file `fd` into dst (pread, in
// pieces of at most 1 GiB): false on a short file or an error (*err: its
// errno, 0 for a short file; may be null).
bool ReadAt(int fd, uint64_t offset, uint64_t n, uint8_t* dst, int* err = nullptr);

// A file opened for reading by OpenConfined's rules, and what it was when
// opened. A sample is identified from it and, on a cache miss, read from
// it: one open per read, and the bytes read are those of the file the
// caches were keyed by. Owns the descriptor; immutable, so the readers of
// one sample may share it.
class OpenFile {
 public:
  OpenFile(int fd, const struct stat& st) : fd_(fd), st_(st) {}
  ~OpenFile();
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;

  int fd() const { return fd_; }
  uint64_t size() const { return static_cast<uint64_t>(st_.st_size); }
  FileVersion version() const { return VersionOf(st_); }

 private:
  const int fd_;
  const struct stat st_;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // Replaces *contents with the whole file and sets *version (if not null)
  // from the open file. NOT_FOUND, PERMISSION_DENIED, FAILED_PRECONDITION
  // (not a regular file), RESOURCE_EXHAUSTED (over `max_bytes`, checked
  // before allocating), DATA_LOSS (the file shrank while being read) or
  // INTERNAL, each naming the path.
  virtual absl::Status ReadFile(const std::string& path, std::string* contents,
                                FileVersion* version,
                                const Beneath* beneath = nullptr,
                                uint64_t max_bytes = kDefaultMaxFileBytes) = 0;

  // Opens `path` for reading, with ReadFile's checks and errors but the
  // size cap; the file's version comes from the open descriptor.
  virtual absl::StatusOr<std::shared_ptr<const OpenFile>> Open(
      const std::string& path, const Beneath* beneath = nullptr) = 0;

  // Replaces *contents with the whole of `file`, opened as `path` (which
  // errors name), with ReadFile's size cap and errors.
  virtual absl::Status ReadOpened(const OpenFile& file, const std::string& path,
                                  std::string* contents,
                                  uint64_t max_bytes = kDefaultMaxFileBytes) = 0;

  // The process-wide POSIX implementation; never deleted.
  static FileSystem* Default();
};

}  // namespace stoker

#endif  // STOKER_SERVER_ACCESS_FILE_SYSTEM_H_
