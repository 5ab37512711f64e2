// Protobuf messages as JSON with 64-bit integers as JSON numbers (protobuf's
// own printer quotes them, as the proto3 JSON mapping asks), field names as
// written in the .proto file and enums by name. Used wherever Stoker prints
// a message for people or programs (the C ABI's stats and session info,
// stokerctl --json). Stateless; thread-safe.
#ifndef STOKER_UTIL_PROTO_JSON_H_
#define STOKER_UTIL_PROTO_JSON_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace stoker {

// Every set field, and every scalar of a proto3 message that has no
// presence, default or not (a field with presence, `optional`, left unset
// is absent: the one way to say so).
std::string ProtoToJson(const google::protobuf::Message& message,
                        int indent = -1);

// The one way a spec reaches the daemon from text (the C ABI's JSON,
// stokerctl's flags): protobuf's JSON mapping, where an enum value may also
// be given by its short name in any case, the value name without the prefix
// all of the enum's values share ("train" for TRANSFORM_TRAIN, "float16"
// for DTYPE_FLOAT16, "raise" for ON_ERROR_RAISE). INVALID_ARGUMENT naming
// the field and, for an enum, the names it takes.
absl::Status JsonToProto(absl::string_view json,
                         google::protobuf::Message* message);

// An enum value from its full or short name (see above); INVALID_ARGUMENT
// "`what` must be one of a, b, c" otherwise.
absl::Status EnumFromName(const google::protobuf::EnumDescriptor* type,
                          absl::string_view name, absl::string_view what,
                          int* value);

// The short names of an enum's values, "_UNSPECIFIED" ones left out,
// lower case: "val, train".
std::string EnumShortNames(const google::protobuf::EnumDescriptor* type);

}  // namespace stoker

#endif  // STOKER_UTIL_PROTO_JSON_H_
