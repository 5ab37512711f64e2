#include "client/cpp/read_summary.h"

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "util/checksum.h"

namespace stoker {

absl::StatusOr<ReadSummary> ReadBatches(
    Session& session, uint64_t batches,
    const std::function<void(const Batch&)>& on_batch) {
  ReadSummary s;
  Checksum sum;
  const absl::Time start = absl::Now();
  for (uint64_t i = 0; i < batches; ++i) {
    absl::StatusOr<Batch> b = session.Next();
    if (!b.ok()) return b.status();
    if (i == 0) s.first_batch_seconds = absl::ToDoubleSeconds(absl::Now() - start);
    // Every field's valid samples in field order, then the statuses.
    for (int f = 0; f < b->field_count(); ++f) {
      const BatchField field = b->field(f);
      sum.Update(field.data, field.size_bytes);
    }
    sum.Update(b->status(), sizeof(uint32_t) * b->samples());
    s.batches++;
    s.samples += b->samples();
    s.errors += b->error_count();
    if (on_batch) on_batch(*b);
  }
  s.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  s.images_per_second = s.seconds > 0 ? s.samples / s.seconds : 0;
  s.checksum = sum.value();
  s.reconnects = session.reconnects();
  return s;
}

std::string SummaryJson(const ReadSummary& s) {
  return absl::StrFormat(
      "{\"batches\": %d, \"samples\": %d, \"errors\": %d, "
      "\"seconds\": %.3f, \"images_per_second\": %.1f, "
      "\"first_batch_seconds\": %.3f, \"checksum\": \"%016x\", "
      "\"reconnects\": %d}",
      s.batches, s.samples, s.errors, s.seconds, s.images_per_second,
      s.first_batch_seconds, s.checksum, s.reconnects);
}

}  // namespace stoker
