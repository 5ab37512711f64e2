#include "shm/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>

#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "boost/interprocess/exceptions.hpp"
#include "boost/interprocess/permissions.hpp"
#include "boost/interprocess/shared_memory_object.hpp"
#include "util/status_macros.h"

namespace stoker::shm {
namespace bip = boost::interprocess;

namespace {

absl::Status FromBoost(const bip::interprocess_exception& e,
                       const std::string& what) {
  int err = e.get_native_error();
  if (err != 0) return ErrnoStatus(err, what);
  if (e.get_error_code() == bip::already_exists_error)
    return absl::AlreadyExistsError(absl::StrCat(what, ": already exists"));
  if (e.get_error_code() == bip::not_found_error)
    return absl::NotFoundError(absl::StrCat(what, ": not found"));
  return absl::InternalError(absl::StrCat(what, ": ", e.what()));
}

}  // namespace

absl::StatusOr<Segment> Segment::Create(const std::string& name,
                                        uint64_t bytes) {
  const std::string what = absl::StrCat("shared memory segment /dev/shm/", name);
  if (bytes == 0) return absl::InvalidArgumentError(what + ": zero size");
  bool created = false;
  try {
    bip::permissions perm(0600);
    bip::shared_memory_object shm(bip::create_only, name.c_str(),
                                  bip::read_write, perm);
    created = true;
    shm.truncate(static_cast<bip::offset_t>(bytes));
    // tmpfs allocates lazily; without this a full /dev/shm shows up as
    // SIGBUS on first touch, possibly in the trainer.
    int rc = posix_fallocate(shm.get_mapping_handle().handle, 0,
                             static_cast<off_t>(bytes));
    if (rc != 0) {
      bip::shared_memory_object::remove(name.c_str());
      return ErrnoStatus(rc, absl::StrFormat("%s: allocating %d bytes", what,
                                             bytes));
    }
    bip::mapped_region region(shm, bip::read_write);
    // Maps every page now (Linux 5.14+; older kernels say EINVAL and the
    // pages fault in on first touch), so writing a batch never faults:
    // under virtualization a fault per 4 KiB page of a large field (an
    // encoded one is mostly touched anew by each file) costs more than the
    // copy.
    madvise(region.get_address(), region.get_size(), MADV_POPULATE_WRITE);
    return Segment(name, std::move(region));
  } catch (const bip::interprocess_exception& e) {
    if (created) bip::shared_memory_object::remove(name.c_str());
    return FromBoost(e, what);
  }
}

absl::StatusOr<Segment> Segment::Open(const std::string& name) {
  const std::string what = absl::StrCat("shared memory segment /dev/shm/", name);
  try {
    bip::shared_memory_object shm(bip::open_only, name.c_str(),
                                  bip::read_write);
    bip::mapped_region region(shm, bip::read_write);
    return Segment(name, std::move(region));
  } catch (const bip::interprocess_exception& e) {
    return FromBoost(e, what);
  }
}

namespace {
// What mapped_region needs of a mappable object, over a plain descriptor.
struct DescriptorMappable {
  int fd;
  bip::mapping_handle_t get_mapping_handle() const {
    return bip::ipcdetail::mapping_handle_from_file_handle(fd);
  }
};
}  // namespace

absl::StatusOr<Segment> Segment::Map(int fd, const std::string& label) {
  const std::string what = absl::StrCat("shared memory segment ", label);
  try {
    bip::mapped_region region(DescriptorMappable{fd}, bip::read_write);
    return Segment(label, std::move(region));
  } catch (const bip::interprocess_exception& e) {
    return FromBoost(e, what);
  }
}

absl::StatusOr<int> Segment::OpenDescriptor(const std::string& name) {
  int fd = shm_open(("/" + name).c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    return ErrnoStatus(errno, absl::StrCat("shared memory segment /dev/shm/", name));
  }
  return fd;
}

absl::Status Segment::Remove(const std::string& name) {
  if (!bip::shared_memory_object::remove(name.c_str())) {
    return absl::NotFoundError(
        absl::StrCat("shared memory segment /dev/shm/", name, " not found"));
  }
  return absl::OkStatus();
}

std::vector<std::string> Segment::List(const std::string& prefix) {
  std::vector<std::string> out;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return out;
  while (struct dirent* e = readdir(dir)) {
    if (absl::StartsWith(e->d_name, prefix)) out.emplace_back(e->d_name);
  }
  closedir(dir);
  return out;
}

std::string Segment::UniqueName(const std::string& prefix,
                                uint64_t session_id) {
  std::random_device rd;  // /dev/urandom on Linux.
  uint64_t token = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return absl::StrFormat("%s%d.%016x", prefix, session_id, token);
}

}  // namespace stoker::shm
