// What the schema (spec.proto, its ops in ops.proto) says that clients and
// docs must not restate: the defaults of the ops' parameters and of the
// session's settings, each a (default_value) option on its field and
// written nowhere else; the settings' ranges ((min_value), (max_value));
// and the source kinds a
// dataset may have. The daemon applies the defaults before it checks a
// spec, the C ABI hands defaults and ranges to clients (which send only
// what a user gave), and tests pin stokerctl's help and the docs to them.
//
// One way to say "absent": a setting with a default is a field with
// presence (proto3 `optional`, or an empty repeated field) left unset. A 0
// set there is a value like any other, checked against the range.
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

// Sets every unset field of `spec` that has a default, in the messages
// it holds too (not in its fields or pipeline: ops get theirs from
// ApplyOpDefaults); the preset's settings only when `spec` is a preset (no
// fields). Idempotent.
absl::Status ApplySessionDefaults(v1::SessionSpec* spec);

// A spec with every setting's default set, the preset's and those of
// every message it may hold included: what an unset field means.
const v1::SessionSpec& SessionDefaults();

// INVALID_ARGUMENT naming the first field of `m` (dotted, from `m`; in the
// messages it holds too) set outside its range: "ring_slots 1 must be in
// 2..256", "client_decode.cpu_share 1.5 must be in 0..1". NaN is in no
// range. Unset fields with presence are not checked.
absl::Status CheckRanges(const google::protobuf::Message& m, const std::string& prefix = "");

// The session's settings that have a default or a range, by dotted path, as
// JSON: {"ring_slots": {"default": 4, "min": 2, "max": 256}, "batch_size":
// {"min": 1, "max": 65536}, "image_size": {"default": 224, ..., "preset":
// true}, "client_decode.max_bytes": {...}, ...}.
const std::string& SessionSettingsJson();

// One setting's range and default in words, for help texts: "2..256;
// default 4", "1..65536", "at least 1; default 1"; "" for a path that has
// neither.
std::string SettingText(const std::string& path);

// The source kinds, as JSON: ["folder", "list", ...] (DatasetSpec's
// `source` fields, in the schema's order).
const std::string& SourceKindsJson();

}  // namespace stoker

#endif  // STOKER_PROTO_SCHEMA_H_
