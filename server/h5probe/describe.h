// The reader's side of server/h5probe/protocol.h: what libhdf5 says of the
// datasets of one file, read through a driver that only preads the
// descriptor it was given (no path is ever opened, so the reader can run
// with no open(2) at all).
//
// Used only inside stoker-h5probe (probe.cc), after its sandbox is up.
// Not thread-safe (one file at a time, as the reader works).
#ifndef STOKER_SERVER_H5PROBE_DESCRIBE_H_
#define STOKER_SERVER_H5PROBE_DESCRIBE_H_

#include "absl/status/status.h"
#include "server/h5probe/protocol.h"

namespace stoker {
namespace h5probe {

// Readies libhdf5: errors never printed, filter plugins never loaded, the
// descriptor driver registered. Call once, before the sandbox closes.
absl::Status InitLibrary();

// Describes each of `r.names` in the file open at `fd` (r.file_size bytes):
// PERMISSION_DENIED for data kept in another file (external storage, an
// external link, a virtual dataset), FAILED_PRECONDITION for a file or
// dataset that is not there or not HDF5.
Answer Describe(int fd, const Request& r);

}  // namespace h5probe
}  // namespace stoker

#endif  // STOKER_SERVER_H5PROBE_DESCRIBE_H_
