#include "proto/schema.h"

#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "proto/spec_util.h"

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

// Applies the defaults of `m`'s unset fields, and of the messages it
// holds; `presets`: the (preset) fields' too.
absl::Status Apply(Message* m, bool presets = true) {
  const Descriptor* d = m->GetDescriptor();
  const Reflection* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (!presets && f->options().GetExtension(v1::preset)) continue;
    if (!DefaultOf(f).empty() && IsUnset(*m, f)) {
      absl::StatusOr<const Message*> one = DefaultMessage(*m, f);
      if (!one.ok()) return one.status();
      m->MergeFrom(**one);  // Only f is set in it.
    }
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !f->is_repeated() &&
        r->HasField(*m, f)) {
      if (absl::Status s = Apply(r->MutableMessage(m, f), presets); !s.ok()) return s;
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

bool HasRange(const FieldDescriptor* f) {
  return f->options().HasExtension(v1::min_value) || f->options().HasExtension(v1::max_value);
}

bool IsInteger(const FieldDescriptor* f) {
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64:
      return true;
    default:
      return false;
  }
}

// A range end as the field's type writes it: 4611686018427387904, 0.05.
std::string EndText(const FieldDescriptor* f, double end) {
  if (IsInteger(f)) return end < 0 ? absl::StrCat(int64_t(end)) : absl::StrCat(uint64_t(end));
  return absl::StrCat(end);
}

nlohmann::json EndJson(const FieldDescriptor* f, double end) {
  if (IsInteger(f)) return end < 0 ? nlohmann::json(int64_t(end)) : nlohmann::json(uint64_t(end));
  return end;
}

// Whether `v` lies in f's range (NaN never does), and the range as words.
// A long double holds every uint64 exactly (2^62 + 1 is not 2^62 here).
bool InRange(const FieldDescriptor* f, long double v, std::string* words) {
  const auto& o = f->options();
  const bool lo = o.HasExtension(v1::min_value), hi = o.HasExtension(v1::max_value);
  double min = o.GetExtension(v1::min_value), max = o.GetExtension(v1::max_value);
  if (f->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT) {  // As a float field holds them.
    min = static_cast<float>(min);
    max = static_cast<float>(max);
  }
  if (lo && hi) {
    *words = absl::StrCat("in ", EndText(f, min), "..", EndText(f, max));
  } else {
    *words = lo ? absl::StrCat("at least ", EndText(f, min))
                : absl::StrCat("at most ", EndText(f, max));
  }
  return (!lo || v >= min) && (!hi || v <= max);
}

absl::Status CheckFields(const Message& m, const std::string& prefix) {
  const Descriptor* d = m.GetDescriptor();
  const Reflection* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) continue;
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (r->HasField(m, f)) {
        if (absl::Status s = CheckFields(r->GetMessage(m, f), prefix + f->name() + ".");
            !s.ok())
          return s;
      }
      continue;
    }
    if (!HasRange(f) || (f->has_presence() && !r->HasField(m, f))) continue;
    std::string words, value;
    bool ok = true;
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_UINT32:
        ok = InRange(f, r->GetUInt32(m, f), &words);
        value = absl::StrCat(r->GetUInt32(m, f));
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        ok = InRange(f, r->GetUInt64(m, f), &words);
        value = absl::StrCat(r->GetUInt64(m, f));
        break;
      case FieldDescriptor::CPPTYPE_INT32:
        ok = InRange(f, r->GetInt32(m, f), &words);
        value = absl::StrCat(r->GetInt32(m, f));
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        ok = InRange(f, r->GetInt64(m, f), &words);
        value = absl::StrCat(r->GetInt64(m, f));
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
        ok = InRange(f, r->GetFloat(m, f), &words);
        value = absl::StrCat(r->GetFloat(m, f));
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        ok = InRange(f, r->GetDouble(m, f), &words);
        value = absl::StrCat(r->GetDouble(m, f));
        break;
      default:
        return absl::InternalError(
            absl::StrCat("range of ", f->full_name(), ": not a type with a range"));
    }
    if (!ok)
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, f->name(), " ", value, " must be ", words));
  }
  return absl::OkStatus();
}

// Each setting of message type `d` with a default or a range, by its
// dotted path.
void Settings(const Descriptor* d, const std::string& prefix, nlohmann::json* out) {
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !f->is_repeated()) {
      Settings(f->message_type(), prefix + f->name() + ".", out);
      continue;
    }
    if (DefaultOf(f).empty() && !HasRange(f)) continue;
    nlohmann::json one = nlohmann::json::object();
    if (!DefaultOf(f).empty()) one["default"] = nlohmann::json::parse(DefaultOf(f));
    const auto& o = f->options();
    if (o.HasExtension(v1::min_value)) one["min"] = EndJson(f, o.GetExtension(v1::min_value));
    if (o.HasExtension(v1::max_value)) one["max"] = EndJson(f, o.GetExtension(v1::max_value));
    if (o.GetExtension(v1::preset)) one["preset"] = true;
    (*out)[prefix + f->name()] = std::move(one);
  }
}

}  // namespace

absl::Status ApplySessionDefaults(v1::SessionSpec* spec) {
  return Apply(spec, /*presets=*/spec->fields_size() == 0);
}

namespace {
// Every message `m` holds made present, then the defaults applied.
void ApplyEverywhere(Message* m) {
  const Descriptor* d = m->GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !f->is_repeated() &&
        f->message_type() != d)
      ApplyEverywhere(m->GetReflection()->MutableMessage(m, f));
  }
  (void)Apply(m);  // schema_test checks that every default parses.
}
}  // namespace

const v1::SessionSpec& SessionDefaults() {
  static const v1::SessionSpec* spec = [] {
    auto* s = new v1::SessionSpec;
    ApplyEverywhere(s);
    return s;
  }();
  return *spec;
}

absl::Status CheckRanges(const google::protobuf::Message& m, const std::string& prefix) {
  return CheckFields(m, prefix);
}

const std::string& SessionSettingsJson() {
  static const std::string* json = [] {
    nlohmann::json out = nlohmann::json::object();
    Settings(v1::SessionSpec::descriptor(), "", &out);
    return new std::string(out.dump());
  }();
  return *json;
}

std::string SettingText(const std::string& path) {
  static const nlohmann::json* settings =
      new nlohmann::json(nlohmann::json::parse(SessionSettingsJson()));
  const auto it = settings->find(path);
  if (it == settings->end()) return "";
  // 1 and 0.05, not 1.0 (as the range errors write them).
  auto text = [](const nlohmann::json& v) {
    return v.is_number_float() ? absl::StrCat(v.get<double>()) : v.dump();
  };
  std::vector<std::string> parts;
  const bool lo = it->contains("min"), hi = it->contains("max");
  if (lo && hi) {
    parts.push_back(absl::StrCat(text((*it)["min"]), "..", text((*it)["max"])));
  } else if (lo || hi) {
    parts.push_back(absl::StrCat(lo ? "at least " : "at most ", text((*it)[lo ? "min" : "max"])));
  }
  if (it->contains("default")) parts.push_back(absl::StrCat("default ", text((*it)["default"])));
  return absl::StrJoin(parts, "; ");
}

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

const std::string& SourceKindsJson() {
  static const std::string* json = [] {
    return new std::string(nlohmann::json(DatasetSourceKinds()).dump());
  }();
  return *json;
}

}  // namespace stoker
