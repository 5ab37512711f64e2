// One shared-memory segment mapped into this process: an anonymous memory
// file (memfd) that the kernel keeps from ever changing size.
//
// The daemon creates a segment, allocates every page and seals it against
// shrinking and growing (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) before
// anyone else holds it, then hands descriptors of it to clients (Share()).
// So no holder of a descriptor, however hostile, can make a page of the
// other side's mapping vanish: there is no ftruncate that could turn the
// producer's next write into SIGBUS. The segment has no name anywhere in the
// file system; it lives until the last descriptor and mapping are gone, so a
// crashed daemon or client leaves nothing behind.
//
// A Segment owns its mapping (unmapped on destruction) and, when it created
// the segment, its descriptor. Boost.Interprocess maps it; its exceptions
// never escape: every failure is an absl::Status. Movable, not copyable, not
// synchronized: share the memory, not the object.
#ifndef STOKER_SHM_SEGMENT_H_
#define STOKER_SHM_SEGMENT_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "boost/interprocess/mapped_region.hpp"

namespace stoker::shm {

class Segment {
 public:
  // Creates a segment of exactly `bytes` bytes labelled `label` (how
  // /proc/<pid>/maps and errors name it; at most 200 bytes), allocates
  // every page up front (so too little memory fails here with
  // RESOURCE_EXHAUSTED instead of SIGBUS later), seals its size and maps
  // it read-write.
  static absl::StatusOr<Segment> Create(const std::string& label,
                                        uint64_t bytes);

  // Maps the segment behind `fd` (received from the daemon) read-write;
  // `fd` stays the caller's. FAILED_PRECONDITION when its size is not
  // sealed: a file its other holders could shrink under the mapping.
  static absl::StatusOr<Segment> Map(int fd, const std::string& label);

  // A new read-write descriptor of a segment this object created
  // (close-on-exec), for handing it to another process. FAILED_PRECONDITION
  // for a segment that was only mapped.
  absl::StatusOr<int> Share() const;
  // Gives a created segment's pages back to the kernel now (a hole the
  // size of the segment; the size stays): whoever still maps it reads
  // zeros, and any page it touches again is charged to it, not to this
  // process. For a segment whose consumer is gone.
  void Discard();
  // Closes this process's descriptor of a created segment, once every
  // holder it is meant for has its own: Share then fails; Discard still
  // works, through the mapping.
  void CloseDescriptor();

  // Labels starting with `prefix` of the segments process `pid` (0: this
  // one) still holds, by a descriptor or a mapping, from /proc: what a
  // test asserts is empty once every session is gone.
  static std::vector<std::string> List(const std::string& prefix,
                                       pid_t pid = 0);

  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  void* base() const { return region_.get_address(); }
  uint64_t size() const { return region_.get_size(); }
  const std::string& name() const { return name_; }

 private:
  Segment(std::string name, boost::interprocess::mapped_region region, int fd)
      : name_(std::move(name)), region_(std::move(region)), fd_(fd), created_(fd >= 0) {}

  std::string name_;
  boost::interprocess::mapped_region region_;
  int fd_ = -1;  // Owned; -1 for a mapped-only segment, or once closed.
  bool created_ = false;  // Made here (not only mapped).
};

}  // namespace stoker::shm

#endif  // STOKER_SHM_SEGMENT_H_
