// A named POSIX shared-memory segment mapped into this process.
//
// Owns one mapping (unmapped on destruction) and nothing else: the name in
// /dev/shm lives until Remove() is called, by whichever process owns the
// segment's lifetime (the daemon, for rings). Boost.Interprocess does the
// creating, sizing and mapping; its exceptions never escape: every failure
// is an absl::Status. A Segment is movable, not copyable, and not
// synchronized: share the memory, not the object.
#ifndef STOKER_SHM_SEGMENT_H_
#define STOKER_SHM_SEGMENT_H_

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
  // Creates `name` (no leading '/') with mode 0600 and exactly `bytes`
  // bytes, allocates every page up front (so a full /dev/shm fails here
  // with RESOURCE_EXHAUSTED instead of SIGBUS later) and maps it read-write.
  // ALREADY_EXISTS when the name is taken. On failure nothing is left
  // behind.
  static absl::StatusOr<Segment> Create(const std::string& name,
                                        uint64_t bytes);

  // Maps an existing segment read-write. NOT_FOUND when it does not exist.
  static absl::StatusOr<Segment> Open(const std::string& name);

  // Maps the segment behind `fd` (received from the daemon) read-write;
  // `fd` stays the caller's. `label` names it in errors and name().
  static absl::StatusOr<Segment> Map(int fd, const std::string& label);

  // A new read-write descriptor of `name` (close-on-exec), for handing the
  // segment to another process. NOT_FOUND when it does not exist.
  static absl::StatusOr<int> OpenDescriptor(const std::string& name);

  // Unlinks the name; existing mappings stay valid. NOT_FOUND if absent.
  static absl::Status Remove(const std::string& name);

  // Names in /dev/shm starting with `prefix`.
  static std::vector<std::string> List(const std::string& prefix);

  // "<prefix><session_id>.<16 random hex digits>": unguessable, so another
  // local user cannot predict and pre-create a session's segment.
  static std::string UniqueName(const std::string& prefix, uint64_t session_id);

  Segment(Segment&&) = default;
  Segment& operator=(Segment&&) = default;

  void* base() const { return region_.get_address(); }
  uint64_t size() const { return region_.get_size(); }
  const std::string& name() const { return name_; }

 private:
  Segment(std::string name, boost::interprocess::mapped_region region)
      : name_(std::move(name)), region_(std::move(region)) {}

  std::string name_;
  boost::interprocess::mapped_region region_;
};

}  // namespace stoker::shm

#endif  // STOKER_SHM_SEGMENT_H_
