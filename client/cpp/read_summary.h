// Reading a session end to end and summarizing what was delivered: the
// logic behind `stokerctl read`, reusable by tests and benchmarks.
// ReadEpochs is synchronous and uses the Session from the calling thread.
#ifndef STOKER_CLIENT_CPP_READ_SUMMARY_H_
#define STOKER_CLIENT_CPP_READ_SUMMARY_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "client/cpp/client.h"

namespace stoker {

struct ReadSummary {
  uint64_t batches = 0;
  uint64_t samples = 0;
  uint64_t errors = 0;  // Samples flagged as failed.
  double seconds = 0;   // From the call to the last batch's release.
  double first_batch_seconds = 0;
  double images_per_second = 0;
  uint64_t checksum = 0;  // Over every batch's fields (in order) and status.
  uint64_t reconnects = 0;  // Daemon restarts the session went through.
};

// Reads `batches` batches from `session` in order, hashing each into the
// checksum. `on_batch` (may be null) sees every batch before it is released.
absl::StatusOr<ReadSummary> ReadBatches(
    Session& session, uint64_t batches,
    const std::function<void(const Batch&)>& on_batch = nullptr);

// One line of JSON; checksum as 16 hex digits.
std::string SummaryJson(const ReadSummary& s);

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_READ_SUMMARY_H_
