#include "proto/schema.h"

#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

namespace stoker {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Unset: absent (a field with presence) or empty (repeated).
bool IsUnset(const Message& m, const FieldDescriptor* f) {
  const Reflection* r = m.GetReflection();
  if (f->is_repeated()) return r->FieldSize(m, f) == 0;
  return !r->HasField(m, f);
}

const std::string& DefaultOf(const FieldDescriptor* f) {
  return f->options().GetExtension(v1::default_value);
}

// A message of f's containing type with only f set to its default, parsed
// once per field (a spec's ops reuse them). A default on a field that can
// be neither absent nor empty could never apply: a schema defect.
absl::StatusOr<const Message*> DefaultMessage(const Message& like, const FieldDescriptor* f) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* parsed = new absl::flat_hash_map<const FieldDescriptor*, std::unique_ptr<Message>>;
  absl::MutexLock lock(&mu);
  auto it = parsed->find(f);
  if (it != parsed->end()) return it->second.get();
  if (!f->is_repeated() && !f->has_presence())
    return absl::InternalError(absl::StrCat("default of ", f->full_name(),
                                            ": the field has no presence (make it optional)"));
  std::unique_ptr<Message> one(like.New());
  const std::string json = absl::StrCat("{\"", f->json_name(), "\": ", DefaultOf(f), "}");
  auto ok = google::protobuf::util::JsonStringToMessage(json, one.get());
  if (!ok.ok())
    return absl::InternalError(absl::StrCat("default of ", f->full_name(), " (", DefaultOf(f),
                                            "): ", ok.message().as_string()));
  return parsed->emplace(f, std::move(one)).first->second.get();
}

absl::Status Apply(Message* m) {
  const Descriptor* d = m->GetDescriptor();
  const Reflection* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (!DefaultOf(f).empty() && IsUnset(*m, f)) {
      absl::StatusOr<const Message*> one = DefaultMessage(*m, f);
      if (!one.ok()) return one.status();
      m->MergeFrom(**one);  // Only f is set in it.
    }
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !f->is_repeated() &&
        r->HasField(*m, f)) {
      if (absl::Status s = Apply(r->MutableMessage(m, f)); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

// The defaults of message type `d` (and the messages it holds) as JSON;
// null when it has none.
nlohmann::json Defaults(const Descriptor* d) {
  nlohmann::json out = nlohmann::json::object();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (!DefaultOf(f).empty()) {
      out[f->name()] = nlohmann::json::parse(DefaultOf(f));
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !f->is_repeated()) {
      nlohmann::json inner = Defaults(f->message_type());
      if (!inner.is_null()) out[f->name()] = std::move(inner);
    }
  }
  return out.empty() ? nlohmann::json() : out;
}

}  // namespace

absl::Status ApplyOpDefaults(v1::Op* op) {
  const Reflection* r = op->GetReflection();
  const FieldDescriptor* f =
      r->GetOneofFieldDescriptor(*op, op->GetDescriptor()->FindOneofByName("op"));
  if (f == nullptr) return absl::OkStatus();
  return Apply(r->MutableMessage(op, f));
}

const std::string& OpDefaultsJson() {
  static const std::string* json = [] {
    nlohmann::json out = nlohmann::json::object();
    const google::protobuf::OneofDescriptor* ops =
        v1::Op::descriptor()->FindOneofByName("op");
    for (int i = 0; i < ops->field_count(); ++i) {
      nlohmann::json d = Defaults(ops->field(i)->message_type());
      out[ops->field(i)->name()] = d.is_null() ? nlohmann::json::object() : std::move(d);
    }
    return new std::string(out.dump());
  }();
  return *json;
}

uint32_t PresetImageSize(const v1::SessionSpec& spec) {
  if (spec.has_image_size()) return spec.image_size();
  static const uint32_t side = [] {
    v1::SessionSpec d;
    const absl::StatusOr<const Message*> m =
        DefaultMessage(d, v1::SessionSpec::descriptor()->FindFieldByName("image_size"));
    return m.ok() ? static_cast<const v1::SessionSpec*>(*m)->image_size() : 0u;
  }();
  return side;
}

const std::string& SourceKindsJson() {
  static const std::string* json = [] {
    nlohmann::json out = nlohmann::json::array();
    const google::protobuf::OneofDescriptor* kinds =
        v1::DatasetSpec::descriptor()->FindOneofByName("source");
    for (int i = 0; i < kinds->field_count(); ++i) out.push_back(kinds->field(i)->name());
    return new std::string(out.dump());
  }();
  return *json;
}

}  // namespace stoker
