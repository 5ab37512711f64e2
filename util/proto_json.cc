#include "util/proto_json.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

namespace stoker {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

nlohmann::json ToJson(const Message& m);

nlohmann::json Value(const Message& m, const FieldDescriptor* f, int i) {
  const Reflection* r = m.GetReflection();
  const bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return rep ? r->GetRepeatedInt32(m, f, i) : r->GetInt32(m, f);
    case FieldDescriptor::CPPTYPE_INT64:
      return rep ? r->GetRepeatedInt64(m, f, i) : r->GetInt64(m, f);
    case FieldDescriptor::CPPTYPE_UINT32:
      return rep ? r->GetRepeatedUInt32(m, f, i) : r->GetUInt32(m, f);
    case FieldDescriptor::CPPTYPE_UINT64:
      return rep ? r->GetRepeatedUInt64(m, f, i) : r->GetUInt64(m, f);
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return rep ? r->GetRepeatedDouble(m, f, i) : r->GetDouble(m, f);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return rep ? r->GetRepeatedFloat(m, f, i) : r->GetFloat(m, f);
    case FieldDescriptor::CPPTYPE_BOOL:
      return rep ? r->GetRepeatedBool(m, f, i) : r->GetBool(m, f);
    case FieldDescriptor::CPPTYPE_ENUM:
      return (rep ? r->GetRepeatedEnum(m, f, i) : r->GetEnum(m, f))->name();
    case FieldDescriptor::CPPTYPE_STRING:
      return rep ? r->GetRepeatedString(m, f, i) : r->GetString(m, f);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return ToJson(rep ? r->GetRepeatedMessage(m, f, i) : r->GetMessage(m, f));
  }
  return nullptr;
}

nlohmann::json ToJson(const Message& m) {
  nlohmann::json out = nlohmann::json::object();
  const auto* d = m.GetDescriptor();
  const Reflection* r = m.GetReflection();
  for (int k = 0; k < d->field_count(); ++k) {
    const FieldDescriptor* f = d->field(k);
    if (f->is_repeated()) {
      nlohmann::json arr = nlohmann::json::array();
      for (int i = 0; i < r->FieldSize(m, f); ++i) arr.push_back(Value(m, f, i));
      out[f->name()] = std::move(arr);
    } else if (!f->has_presence() || r->HasField(m, f)) {
      out[f->name()] = Value(m, f, 0);
    }
  }
  return out;
}

// The prefix every value name of `type` shares, up to and including its
// last '_' ("ON_ERROR_"), or "".
std::string SharedPrefix(const google::protobuf::EnumDescriptor* type) {
  std::string prefix = type->value(0)->name();
  for (int i = 1; i < type->value_count(); ++i) {
    const std::string& n = type->value(i)->name();
    size_t k = 0;
    while (k < prefix.size() && k < n.size() && prefix[k] == n[k]) ++k;
    prefix.resize(k);
  }
  const size_t underscore = prefix.rfind('_');
  return underscore == std::string::npos ? "" : prefix.substr(0, underscore + 1);
}

// Rewrites enum values given by short name into their full names, in
// place, following `d`; other values are left for protobuf's parser.
absl::Status NormalizeEnums(const google::protobuf::Descriptor* d,
                            nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) return absl::OkStatus();
  for (auto& [key, value] : j.items()) {
    const FieldDescriptor* f = d->FindFieldByName(key);
    if (f == nullptr) f = d->FindFieldByCamelcaseName(key);
    if (f == nullptr) {
      for (int k = 0; k < d->field_count() && f == nullptr; ++k) {
        if (d->field(k)->json_name() == key) f = d->field(k);
      }
    }
    if (f == nullptr) continue;  // Protobuf's parser names it.
    const std::string where = path.empty() ? f->name() : path + "." + f->name();
    auto fix = [&](nlohmann::json& v) -> absl::Status {
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        return NormalizeEnums(f->message_type(), v, where);
      }
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_ENUM && v.is_string()) {
        int number = 0;
        absl::Status s = EnumFromName(f->enum_type(), v.get<std::string>(),
                                      where, &number);
        if (!s.ok()) return s;
        v = f->enum_type()->FindValueByNumber(number)->name();
      }
      return absl::OkStatus();
    };
    if (f->is_repeated() && value.is_array()) {
      for (auto& v : value) {
        absl::Status s = fix(v);
        if (!s.ok()) return s;
      }
    } else {
      absl::Status s = fix(value);
      if (!s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string EnumShortNames(const google::protobuf::EnumDescriptor* type) {
  const std::string prefix = SharedPrefix(type);
  std::vector<std::string> names;
  for (int i = 0; i < type->value_count(); ++i) {
    const std::string& n = type->value(i)->name();
    if (absl::EndsWith(n, "_UNSPECIFIED")) continue;
    names.push_back(absl::AsciiStrToLower(n.substr(prefix.size())));
  }
  return absl::StrJoin(names, ", ");
}

absl::Status EnumFromName(const google::protobuf::EnumDescriptor* type,
                          absl::string_view name, absl::string_view what,
                          int* value) {
  const std::string upper = absl::AsciiStrToUpper(name);
  const google::protobuf::EnumValueDescriptor* v = type->FindValueByName(upper);
  if (v == nullptr) v = type->FindValueByName(SharedPrefix(type) + upper);
  if (v == nullptr || absl::EndsWith(v->name(), "_UNSPECIFIED")) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " must be one of ", EnumShortNames(type), ", got '", name, "'"));
  }
  *value = v->number();
  return absl::OkStatus();
}

absl::Status JsonToProto(absl::string_view json,
                         google::protobuf::Message* message) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(
        absl::StrCat(message->GetDescriptor()->name(), ": not valid JSON"));
  }
  absl::Status s = NormalizeEnums(message->GetDescriptor(), j, "");
  if (!s.ok()) return s;
  google::protobuf::util::JsonParseOptions options;
  auto parsed = google::protobuf::util::JsonStringToMessage(j.dump(), message, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        message->GetDescriptor()->name(), ": ", parsed.message().as_string()));
  }
  return absl::OkStatus();
}

std::string ProtoToJson(const Message& message, int indent) {
  return ToJson(message).dump(indent);
}

}  // namespace stoker
