// The rules a SessionSpec must meet before anything is opened for it, in
// one place: every rule that does not depend on the data or on the daemon's
// state (the files, its nodes, its quotas). The daemon applies them to
// every OpenSession; libstoker.so links the same code (stoker_check_spec),
// so a client reports a bad spec with the daemon's words before it
// connects, and no client restates them.
//
// Errors are INVALID_ARGUMENT naming the first bad field (and for an op,
// its position and kind). Stateless; thread-safe.
#ifndef STOKER_SERVER_PIPELINE_SPEC_CHECK_H_
#define STOKER_SERVER_PIPELINE_SPEC_CHECK_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/stoker.pb.h"
#include "server/pipeline/pipeline.h"

namespace stoker {

// A source is named, its path is not empty and its settings are in their
// ranges (the daemon's WarmCache checks a dataset with this alone).
absl::Status CheckDatasetSpec(const v1::DatasetSpec& spec);

// Completes `spec` with the schema's defaults (ApplySessionDefaults), then
// checks the whole of it; its compiled pipeline when it is valid (the one
// the session then runs: a spec is compiled once).
absl::StatusOr<Pipeline> CheckSessionSpec(v1::SessionSpec* spec);

// The dataset a session of `spec` opens: its spec's, with the shard
// members its fields name (FieldSpec.member) added to the webdataset
// source's members; INVALID_ARGUMENT when a field names a member and the
// source keeps none (shards in an object store keep the picture, the
// mask and the label).
absl::StatusOr<v1::DatasetSpec> SessionDataset(const v1::SessionSpec& spec);

}  // namespace stoker

#endif  // STOKER_SERVER_PIPELINE_SPEC_CHECK_H_
