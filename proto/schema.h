// What the schema (spec.proto) says that clients and docs must not restate:
// the ops' parameter defaults, each a (default_value) option on its field
// and written nowhere else (the daemon applies them to an op before
// checking it; the C ABI hands them to clients, which send only what a
// user gave), and the source kinds a dataset may have.
#ifndef STOKER_PROTO_SCHEMA_H_
#define STOKER_PROTO_SCHEMA_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "proto/spec.pb.h"

namespace stoker {

// Sets every parameter of `op`'s op message (and of the messages it holds)
// that is unset and has a default: a field with presence that is absent, or
// an empty repeated field. INTERNAL if a default does not parse (a schema
// defect, which schema_test catches).
absl::Status ApplyOpDefaults(v1::Op* op);

// Every op's defaults as JSON: {"flip": {"probability": 0.5}, "random_erasing":
// {"probability": 0.5, "scale": {"min": 0.02, "max": 0.33}, ...}, ...} (nested
// messages by their field's name: "random_patch": {"label_bias": {"pos": 1,
// ...}}), by the spec's field names; every op is a key (an op without
// defaults: {}), so the JSON is also the list of ops.
const std::string& OpDefaultsJson();

// The presets' output side: the spec's image_size, or the schema's
// default when it leaves it unset.
uint32_t PresetImageSize(const v1::SessionSpec& spec);

// The source kinds, as JSON: ["folder", "list", "lmdb", "npy", "hdf5",
// "nifti", "webdataset", "s3"] (DatasetSpec's `source` fields, in the schema's order).
const std::string& SourceKindsJson();

}  // namespace stoker

#endif  // STOKER_PROTO_SCHEMA_H_
