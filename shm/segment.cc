#include "shm/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "boost/interprocess/exceptions.hpp"
#include "util/status_macros.h"

namespace stoker::shm {
namespace bip = boost::interprocess;

namespace {

constexpr int kSizeSeals = F_SEAL_SHRINK | F_SEAL_GROW;
constexpr size_t kMaxLabelBytes = 200;  // memfd names stop at 249.
constexpr char kMemfdPrefix[] = "/memfd:";

absl::Status FromBoost(const bip::interprocess_exception& e,
                       const std::string& what) {
  int err = e.get_native_error();
  if (err != 0) return ErrnoStatus(err, what);
  return absl::InternalError(absl::StrCat(what, ": ", e.what()));
}

// What mapped_region needs of a mappable object, over a plain descriptor.
struct DescriptorMappable {
  int fd;
  bip::mapping_handle_t get_mapping_handle() const {
    return bip::ipcdetail::mapping_handle_from_file_handle(fd);
  }
};

absl::StatusOr<bip::mapped_region> MapReadWrite(int fd,
                                                const std::string& what) {
  try {
    return bip::mapped_region(DescriptorMappable{fd}, bip::read_write);
  } catch (const bip::interprocess_exception& e) {
    return FromBoost(e, what);
  }
}

// The label of a /proc link or maps path naming a memfd, or "".
std::string MemfdLabel(absl::string_view path) {
  if (!absl::ConsumePrefix(&path, kMemfdPrefix)) return "";
  absl::ConsumeSuffix(&path, " (deleted)");
  return std::string(path);
}

}  // namespace

absl::StatusOr<Segment> Segment::Create(const std::string& label,
                                        uint64_t bytes) {
  const std::string what = absl::StrCat("shared memory segment ", label);
  if (bytes == 0) return absl::InvalidArgumentError(what + ": zero size");
  if (label.size() > kMaxLabelBytes || label.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(what + ": bad label");
  }
  int fd = memfd_create(label.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return ErrnoStatus(errno, what);
  auto fail = [&](int err, const std::string& doing) {
    close(fd);
    return ErrnoStatus(err, absl::StrCat(what, ": ", doing));
  };
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    return fail(errno, absl::StrFormat("sizing to %d bytes", bytes));
  }
  // Memory files allocate lazily; without this too little memory shows up
  // as SIGBUS on first touch, possibly in the trainer.
  if (int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); rc != 0) {
    return fail(rc == ENOSPC ? ENOMEM : rc,
                absl::StrFormat("allocating %d bytes", bytes));
  }
  if (fcntl(fd, F_ADD_SEALS, kSizeSeals | F_SEAL_SEAL) != 0) {
    return fail(errno, "sealing its size");
  }
  absl::StatusOr<bip::mapped_region> region = MapReadWrite(fd, what);
  if (!region.ok()) {
    close(fd);
    return region.status();
  }
  // Maps every page now (Linux 5.14+; older kernels say EINVAL and the
  // pages fault in on first touch), so writing a batch never faults: under
  // virtualization a fault per 4 KiB page of a large field (an encoded one
  // is mostly touched anew by each file) costs more than the copy.
  madvise(region->get_address(), region->get_size(), MADV_POPULATE_WRITE);
  return Segment(label, *std::move(region), fd);
}

absl::StatusOr<Segment> Segment::Map(int fd, const std::string& label) {
  const std::string what = absl::StrCat("shared memory segment ", label);
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & kSizeSeals) != kSizeSeals) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": its size is not sealed (not a ring from this daemon version)"));
  }
  STOKER_ASSIGN_OR_RETURN(bip::mapped_region region, MapReadWrite(fd, what));
  return Segment(label, std::move(region), -1);
}

absl::StatusOr<int> Segment::Share() const {
  if (fd_ < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("shared memory segment ", name_, " was only mapped here"));
  }
  int fd = fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(errno, "shared memory segment " + name_);
  return fd;
}

void Segment::Discard() {
  if (fd_ >= 0) {
    fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(size()));
  } else if (created_ && base() != nullptr) {
    madvise(base(), size(), MADV_REMOVE);  // The same hole, through the mapping.
  }
}

void Segment::CloseDescriptor() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

std::vector<std::string> Segment::List(const std::string& prefix, pid_t pid) {
  const std::string proc =
      pid == 0 ? std::string("/proc/self") : absl::StrCat("/proc/", pid);
  std::set<std::string> found;
  auto note = [&](absl::string_view path) {
    std::string label = MemfdLabel(path);
    if (!label.empty() && absl::StartsWith(label, prefix)) found.insert(label);
  };
  std::ifstream maps(proc + "/maps");
  for (std::string line; std::getline(maps, line);) {
    const size_t at = line.find(kMemfdPrefix);
    if (at != std::string::npos) note(absl::string_view(line).substr(at));
  }
  const std::string fds = proc + "/fd";
  if (DIR* dir = opendir(fds.c_str())) {
    while (struct dirent* e = readdir(dir)) {
      char target[512];
      const std::string link = absl::StrCat(fds, "/", e->d_name);
      ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
      if (n > 0) note(absl::string_view(target, static_cast<size_t>(n)));
    }
    closedir(dir);
  }
  return {found.begin(), found.end()};
}

Segment::Segment(Segment&& other) noexcept
    : name_(std::move(other.name_)),
      region_(std::move(other.region_)),
      fd_(std::exchange(other.fd_, -1)),
      created_(std::exchange(other.created_, false)) {}

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    name_ = std::move(other.name_);
    region_ = std::move(other.region_);
    fd_ = std::exchange(other.fd_, -1);
    created_ = std::exchange(other.created_, false);
  }
  return *this;
}

Segment::~Segment() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace stoker::shm
