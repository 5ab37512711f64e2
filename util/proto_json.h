// Protobuf messages as JSON with 64-bit integers as JSON numbers (protobuf's
// own printer quotes them, as the proto3 JSON mapping asks), field names as
// written in the .proto file and enums by name. Used wherever Stoker prints
// a message for people or programs (the C ABI's stats and session info,
// stokerctl --json). Stateless; thread-safe.
#ifndef STOKER_UTIL_PROTO_JSON_H_
#define STOKER_UTIL_PROTO_JSON_H_

#include <string>

#include "google/protobuf/message.h"

namespace stoker {

// Every set field (and every scalar of a proto3 message, default or not).
std::string ProtoToJson(const google::protobuf::Message& message,
                        int indent = -1);

}  // namespace stoker

#endif  // STOKER_UTIL_PROTO_JSON_H_
