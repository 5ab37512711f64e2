#include "server/access/file_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "shm/open_channel.h"
#include "util/status_macros.h"

namespace stoker {

Beneath::~Beneath() {
  if (dir_fd >= 0) close(dir_fd);
}

absl::Status FileGuard::Check(const struct stat& st, const std::string& path) const {
  const auto dev = static_cast<uint64_t>(st.st_dev);
  const auto ino = static_cast<uint64_t>(st.st_ino);
  bool refused = daemon_uid >= 0 && static_cast<int64_t>(st.st_uid) == daemon_uid;
  for (uint64_t d : devices) refused = refused || d == dev;
  for (const auto& [d, i] : inodes) refused = refused || (d == dev && i == ino);
  if (!refused) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      path, " is one of the daemon's own files (its rings, caches, sockets or a "
      "file its user owns): a dataset may not name it"));
}

FileVersion VersionOf(const struct stat& st) {
  return FileVersion{static_cast<uint64_t>(st.st_size),
                     static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 +
                         st.st_mtim.tv_nsec,
                     static_cast<uint64_t>(st.st_dev),
                     static_cast<uint64_t>(st.st_ino),
                     static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec};
}

namespace {

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

absl::Status NotRegular(const std::string& path, const char* kind) {
  return absl::FailedPreconditionError(
      absl::StrCat(path, " is ", kind, ": only regular files are read"));
}

// The path of `path` relative to the folder of `beneath` ("." for the folder).
std::string Relative(const std::string& path, const Beneath& beneath) {
  if (path == beneath.prefix) return ".";
  const size_t cut = beneath.prefix == "/" ? 0 : beneath.prefix.size();
  return path.substr(cut + 1);
}

// The error of an open of `path` that failed with `err`.
absl::Status OpenError(int err, const std::string& path, const Beneath* beneath) {
  if (err == EXDEV && beneath != nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, " leads outside the dataset folder ", beneath->prefix));
  }
  if (err == ENXIO) return NotRegular(path, "a socket or a device");
  if (err == ENOTDIR) return NotRegular(path, "not a folder");
  if (err == EBADF && beneath != nullptr && beneath->opener != nullptr) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the client handed over a descriptor for ", path, " that is not open for reading"));
  }
  return ErrnoStatus(err, path);
}

// open(2) or, confined, the caller's own open: by its opener (the kernel
// checks the caller's rights), or shm::OpenInFolder in the folder. A
// descriptor, or -1 and *err; an error only when the opener is gone.
absl::StatusOr<int> OpenOrErrno(const std::string& path, uint64_t flags, const Beneath* beneath,
                                int* err) {
  long fd;
  if (beneath == nullptr) {
    fd = open(path.c_str(), static_cast<int>(flags));
  } else if (beneath->opener == nullptr && beneath->dir_fd < 0) {
    // Confined to no folder (an object store's dataset): nothing opens.
    *err = EACCES;
    return -1;
  } else if (beneath->opener != nullptr) {
    return beneath->opener->OpenOne((flags & O_DIRECTORY) != 0 ? shm::OpenOp::kOpenFolder
                                                                : shm::OpenOp::kOpenFile,
                                    Relative(path, *beneath), err);
  } else {
    fd = shm::OpenInFolder(beneath->dir_fd, Relative(path, *beneath).c_str(), flags);
  }
  *err = fd < 0 ? errno : 0;
  return static_cast<int>(fd);
}

absl::StatusOr<int> OpenRaw(const std::string& path, uint64_t flags, const Beneath* beneath) {
  int err = 0;
  STOKER_ASSIGN_OR_RETURN(const int fd, OpenOrErrno(path, flags, beneath, &err));
  if (fd < 0) return OpenError(err, path, beneath);
  return fd;
}

// PERMISSION_DENIED when a confined `path` does not lie below the folder
// (or is not the folder itself).
absl::Status CheckBeneath(const std::string& path, const Beneath* beneath) {
  if (beneath == nullptr) return absl::OkStatus();
  if (beneath->prefix.empty()) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": this dataset reads no local file (it is confined to no folder)"));
  }
  if (path == beneath->prefix) return absl::OkStatus();
  const std::string& pre = beneath->prefix;
  // "/" confines to the whole tree: every absolute path is beneath it.
  const size_t cut = pre == "/" ? 0 : pre.size();
  if (path.size() <= cut + 1 || path.compare(0, cut, pre, 0, cut) != 0 || path[cut] != '/') {
    return absl::PermissionDeniedError(absl::StrCat(path, " is outside the dataset folder ", pre));
  }
  return absl::OkStatus();
}

// What a symlink (or an entry of unknown type) named `name` in `folder`
// is, opened as a dataset's file is opened: one an earlier client refused
// as leading out of its folder is kOutside; one the caller may not open,
// kFile (its read is refused); one broken, kOther.
FolderEntry::Kind ResolveKind(const std::string& folder, const std::string& name,
                              const Beneath* beneath) {
  int err = 0;
  absl::StatusOr<int> fd = OpenOrErrno(InFolder(folder, name),
                                       O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, beneath, &err);
  if (fd.ok() && *fd < 0 && err == EXDEV && beneath != nullptr) return FolderEntry::kOutside;
  // One the caller may not open is listed, as ImageFolder lists it: its
  // read is refused, naming it.
  if (fd.ok() && *fd < 0 && (err == EACCES || err == EPERM)) return FolderEntry::kFile;
  if (!fd.ok() || *fd < 0) return FolderEntry::kOther;
  struct stat st {};
  const bool ok = fstat(*fd, &st) == 0;
  close(*fd);
  if (!ok) return FolderEntry::kOther;
  return S_ISDIR(st.st_mode) ? FolderEntry::kFolder
         : S_ISREG(st.st_mode) ? FolderEntry::kFile
                               : FolderEntry::kOther;
}

}  // namespace

absl::StatusOr<std::vector<FolderEntry>> ListFolderEntries(const std::string& path,
                                                           const Beneath* beneath,
                                                           uint64_t max_entries,
                                                           struct stat* folder_st) {
  const std::string trimmed = path.size() > 1 && path.back() == '/' ? path.substr(0, path.size() - 1)
                                                                   : path;
  STOKER_RETURN_IF_ERROR(CheckBeneath(trimmed, beneath));
  // Its own open file description (never a dup of the folder's: that would
  // share the offset).
  STOKER_ASSIGN_OR_RETURN(
      const int fd, OpenRaw(trimmed, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK, beneath));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return ErrnoStatus(err, path);
  }
  if (beneath != nullptr && beneath->guard != nullptr) {
    absl::Status s = beneath->guard->Check(st, path);
    if (!s.ok()) {
      close(fd);
      return s;
    }
  }
  if (folder_st != nullptr) *folder_st = st;
  DIR* dir = fdopendir(fd);
  if (dir == nullptr) {
    const int err = errno;
    close(fd);
    return ErrnoStatus(err, path);
  }
  std::vector<FolderEntry> entries;
  std::vector<size_t> unknown;
  absl::Status s;
  while (const dirent* e = readdir(dir)) {
    const absl::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    if (entries.size() >= max_entries) {
      s = absl::ResourceExhaustedError(absl::StrCat(
          path, " holds over ", max_entries, " entries (--max-dataset-files)"));
      break;
    }
    FolderEntry::Kind kind = FolderEntry::kOther;
    if (e->d_type == DT_DIR) kind = FolderEntry::kFolder;
    if (e->d_type == DT_REG) kind = FolderEntry::kFile;
    if (e->d_type == DT_LNK || e->d_type == DT_UNKNOWN) unknown.push_back(entries.size());
    entries.push_back(FolderEntry{std::string(name), kind});
  }
  closedir(dir);
  if (!s.ok()) return s;
  // A symlink is what its target is, opened as the caller opens it.
  for (size_t i : unknown) entries[i].kind = ResolveKind(trimmed, entries[i].name, beneath);
  std::sort(entries.begin(), entries.end(),
            [](const FolderEntry& a, const FolderEntry& b) { return a.name < b.name; });
  return entries;
}

absl::StatusOr<std::vector<std::string>> ListFolder(const std::string& path,
                                                    const Beneath* beneath,
                                                    uint64_t max_entries) {
  STOKER_ASSIGN_OR_RETURN(std::vector<FolderEntry> entries,
                          ListFolderEntries(path, beneath, max_entries));
  std::vector<std::string> names;
  names.reserve(entries.size());
  for (FolderEntry& e : entries) names.push_back(std::move(e.name));
  return names;
}

std::string InFolder(const std::string& folder, const std::string& name) {
  return absl::StrCat(absl::StripSuffix(folder, "/"), "/", name);
}

bool ReadAt(int fd, uint64_t offset, uint64_t n, uint8_t* dst, int* err) {
  while (n > 0) {
    const ssize_t got = pread(fd, dst, std::min<uint64_t>(n, 1u << 30), static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (err != nullptr) *err = got < 0 ? errno : 0;
      return false;
    }
    dst += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<uint64_t>(got);
  }
  return true;
}

absl::StatusOr<std::string> ReadHead(const std::string& path, const Beneath* beneath, size_t n) {
  STOKER_ASSIGN_OR_RETURN(const int fd, OpenConfined(path, O_RDONLY, beneath));
  std::string head(n, '\0');
  const ssize_t got = pread(fd, head.data(), n, 0);
  const int err = errno;
  close(fd);
  if (got < 0) return ErrnoStatus(err, path);
  head.resize(static_cast<size_t>(got));
  return head;
}

absl::StatusOr<int> OpenConfined(const std::string& path, uint64_t flags,
                                 const Beneath* beneath, struct stat* st_out) {
  STOKER_RETURN_IF_ERROR(CheckBeneath(path, beneath));
  flags |= O_CLOEXEC;
  // Non-blocking: opening a FIFO for reading must not wait for a writer.
  if ((flags & O_PATH) == 0) flags |= O_NONBLOCK | O_NOCTTY;
  STOKER_ASSIGN_OR_RETURN(const int fd, OpenRaw(path, flags, beneath));
  struct stat st;
  absl::Status s;
  if (fstat(fd, &st) != 0) {
    s = ErrnoStatus(errno, path);
  } else if (!S_ISREG(st.st_mode)) {
    s = NotRegular(path, KindOf(st.st_mode));
  } else if (beneath != nullptr && beneath->guard != nullptr) {
    s = beneath->guard->Check(st, path);
  }
  if (!s.ok()) {
    close(fd);
    return s;
  }
  if (st_out != nullptr) *st_out = st;
  return fd;
}

namespace {

class PosixFileSystem : public FileSystem {
 public:
  absl::Status ReadFile(const std::string& path, std::string* contents,
                        FileVersion* version, const Beneath* beneath,
                        uint64_t max_bytes) override {
    STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const OpenFile> file, Open(path, beneath));
    if (version != nullptr) *version = file->version();
    return ReadOpened(*file, path, contents, max_bytes);
  }

  absl::StatusOr<std::shared_ptr<const OpenFile>> Open(const std::string& path,
                                                       const Beneath* beneath) override {
    struct stat st;
    STOKER_ASSIGN_OR_RETURN(int fd, OpenConfined(path, O_RDONLY, beneath, &st));
    return std::make_shared<const OpenFile>(fd, st);
  }

  absl::Status ReadOpened(const OpenFile& file, const std::string& path,
                          std::string* contents, uint64_t max_bytes) override {
    // Before any allocation: a sparse file may claim a terabyte.
    if (file.size() > max_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          path, " is ", file.size(), " bytes, over the daemon's limit of ", max_bytes,
          " bytes for one file (--max-file-bytes)"));
    }
    contents->resize(static_cast<size_t>(file.size()));
    size_t done = 0;
    while (done < contents->size()) {
      ssize_t n = pread(file.fd(), contents->data() + done, contents->size() - done,
                        static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoStatus(errno, path);
      if (n == 0) {
        return absl::DataLossError(absl::StrCat(
            path, ": file shrank while reading (", done, " of ",
            contents->size(), " bytes)"));
      }
      done += static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }
};

}  // namespace

FileSystem* FileSystem::Default() {
  static FileSystem* fs = new PosixFileSystem;
  return fs;
}

OpenFile::~OpenFile() { close(fd_); }

absl::StatusOr<std::shared_ptr<void>> ChargeHeld(const Beneath* beneath, const std::string& path) {
  if (beneath == nullptr || !beneath->charge_held) return std::shared_ptr<void>();
  std::shared_ptr<void> token = beneath->charge_held(1);
  if (token == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        path, ": this user's sessions keep as many files open or mapped as the daemon allows "
              "one user (--max-open-files-per-user); use fewer, larger files"));
  }
  return token;
}

}  // namespace stoker
