#include "util/proto_json.h"

#include "google/protobuf/descriptor.h"
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
    } else if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE ||
               r->HasField(m, f)) {
      out[f->name()] = Value(m, f, 0);
    }
  }
  return out;
}

}  // namespace

std::string ProtoToJson(const Message& message, int indent) {
  return ToJson(message).dump(indent);
}

}  // namespace stoker
