// The schema's op defaults (every one parses, applying them fills only what
// a spec left unset, the JSON clients read carries each), the session's
// settings (defaults and ranges: every range end is accepted and one step
// past it refused) and source kinds.
#include "proto/schema.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace stoker {
namespace {

TEST(SchemaTest, EveryOpsDefaultsApplyToAnEmptyOp) {
  const google::protobuf::OneofDescriptor* ops = v1::Op::descriptor()->FindOneofByName("op");
  ASSERT_GT(ops->field_count(), 10);
  for (int i = 0; i < ops->field_count(); ++i) {
    v1::Op op;
    google::protobuf::Message* params =
        op.GetReflection()->MutableMessage(&op, ops->field(i));  // The op, empty.
    ASSERT_TRUE(ApplyOpDefaults(&op).ok()) << ops->field(i)->name();
    // Every parameter with a default now holds it.
    const google::protobuf::Descriptor* d = params->GetDescriptor();
    for (int k = 0; k < d->field_count(); ++k) {
      const google::protobuf::FieldDescriptor* f = d->field(k);
      if (f->options().GetExtension(v1::default_value).empty()) continue;
      const google::protobuf::Reflection* r = params->GetReflection();
      EXPECT_TRUE(f->is_repeated() ? r->FieldSize(*params, f) > 0 : r->HasField(*params, f))
          << f->full_name();
    }
  }
}

TEST(SchemaTest, FillsOnlyWhatIsUnset) {
  v1::Op op;
  op.mutable_rot90()->set_max_k(2);
  ASSERT_TRUE(ApplyOpDefaults(&op).ok());
  EXPECT_FLOAT_EQ(op.rot90().probability(), 0.1f);
  EXPECT_EQ(op.rot90().max_k(), 2u);
  ASSERT_EQ(op.rot90().axes_size(), 2);
  EXPECT_EQ(op.rot90().axes(1), 1u);

  v1::Op erase;
  erase.mutable_random_erasing()->mutable_ratio()->set_min(1);
  erase.mutable_random_erasing()->mutable_ratio()->set_max(2);
  erase.mutable_random_erasing()->set_probability(0);  // Set, though zero.
  ASSERT_TRUE(ApplyOpDefaults(&erase).ok());
  EXPECT_EQ(erase.random_erasing().probability(), 0.0f);
  EXPECT_FLOAT_EQ(erase.random_erasing().scale().min(), 0.02f);
  EXPECT_FLOAT_EQ(erase.random_erasing().scale().max(), 0.33f);
  EXPECT_EQ(erase.random_erasing().ratio().max(), 2.0f);

  v1::Op patch;  // A nested message's defaults, once it is there.
  patch.mutable_random_patch()->mutable_label_bias()->set_field("seg");
  ASSERT_TRUE(ApplyOpDefaults(&patch).ok());
  EXPECT_EQ(patch.random_patch().label_bias().pos(), 1.0f);
  v1::Op plain;
  plain.mutable_random_patch()->add_shape(8);
  ASSERT_TRUE(ApplyOpDefaults(&plain).ok());
  EXPECT_FALSE(plain.random_patch().has_label_bias());

  v1::Op none;  // No op set: nothing to do.
  EXPECT_TRUE(ApplyOpDefaults(&none).ok());
}

TEST(SchemaTest, TheJsonCarriesEveryDefault) {
  const nlohmann::json d = nlohmann::json::parse(OpDefaultsJson());
  EXPECT_EQ(d["flip"]["probability"], 0.5);
  EXPECT_EQ(d["random_grayscale"]["probability"], 0.1);
  EXPECT_EQ(d["rot90"]["axes"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(d["random_erasing"]["scale"]["max"], 0.33);
  EXPECT_EQ(d["random_patch"]["label_bias"]["neg"], 1);
  EXPECT_EQ(d["center_crop"], nlohmann::json::object());  // Every op, defaults or not.
  EXPECT_EQ(d.size(),
            static_cast<size_t>(v1::Op::descriptor()->FindOneofByName("op")->field_count()));
}

// Every case of DatasetSpec's `source`, in the schema's order, each a
// message of its own: a new kind is listed without an edit here.
TEST(SchemaTest, SourceKindsAreTheDatasetSpecsSources) {
  const nlohmann::json kinds = nlohmann::json::parse(SourceKindsJson());
  const google::protobuf::OneofDescriptor* source =
      v1::DatasetSpec::descriptor()->FindOneofByName("source");
  ASSERT_EQ(kinds.size(), static_cast<size_t>(source->field_count()));
  EXPECT_EQ(kinds.front(), "folder");
  for (size_t i = 0; i < kinds.size(); ++i) {
    const google::protobuf::FieldDescriptor* f =
        v1::DatasetSpec::descriptor()->FindFieldByName(kinds[i].get<std::string>());
    ASSERT_NE(f, nullptr) << kinds[i];
    EXPECT_EQ(f->containing_oneof(), source) << kinds[i];
    EXPECT_EQ(f->index_in_oneof(), static_cast<int>(i)) << kinds[i];
    ASSERT_EQ(f->type(), google::protobuf::FieldDescriptor::TYPE_MESSAGE) << kinds[i];
    EXPECT_TRUE(absl::EndsWith(f->message_type()->name(), "Source")) << kinds[i];
  }
  for (const char* kind : {"npy", "hdf5", "webdataset", "s3", "raw"}) {
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), kind), kinds.end()) << kind;
  }
}

// Each setting's value at `path` (dotted) in `spec`, made settable.
google::protobuf::Message* Holder(v1::SessionSpec* spec, const std::string& path,
                                  const google::protobuf::FieldDescriptor** field) {
  google::protobuf::Message* m = spec;
  size_t from = 0;
  for (size_t dot; (dot = path.find('.', from)) != std::string::npos; from = dot + 1) {
    const auto* f = m->GetDescriptor()->FindFieldByName(path.substr(from, dot - from));
    m = m->GetReflection()->MutableMessage(m, f);
  }
  *field = m->GetDescriptor()->FindFieldByName(path.substr(from));
  return m;
}

void Set(google::protobuf::Message* m, const google::protobuf::FieldDescriptor* f,
         long double v) {
  const auto* r = m->GetReflection();
  switch (f->cpp_type()) {
    case google::protobuf::FieldDescriptor::CPPTYPE_UINT32:
      return r->SetUInt32(m, f, static_cast<uint32_t>(v));
    case google::protobuf::FieldDescriptor::CPPTYPE_UINT64:
      return r->SetUInt64(m, f, static_cast<uint64_t>(v));
    case google::protobuf::FieldDescriptor::CPPTYPE_FLOAT:
      return r->SetFloat(m, f, static_cast<float>(v));
    default:
      FAIL() << f->full_name() << " has a range but no number type";
  }
}

TEST(SchemaTest, EverySettingsRangeIsCheckedAtBothEnds) {
  const nlohmann::json settings = nlohmann::json::parse(SessionSettingsJson());
  int ranged = 0;
  for (const auto& [path, s] : settings.items()) {
    for (const char* end : {"min", "max"}) {
      if (!s.contains(end)) continue;
      ++ranged;
      const bool is_min = std::string(end) == "min";
      const long double at = s[end].get<double>();
      v1::SessionSpec spec;
      spec.set_batch_size(1);  // In range unless it is the one tried.
      const google::protobuf::FieldDescriptor* f;
      google::protobuf::Message* m = Holder(&spec, path, &f);
      ASSERT_NE(f, nullptr) << path;
      Set(m, f, at);
      EXPECT_TRUE(CheckRanges(spec).ok()) << path << " at " << end << ": "
                                          << CheckRanges(spec);
      const bool integer = f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_FLOAT;
      const long double step = integer ? 1 : 0.01L;
      if (is_min && at == 0 && integer) continue;  // Nothing below an unsigned 0.
      Set(m, f, is_min ? at - step : at + step);
      const absl::Status past = CheckRanges(spec);
      EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument) << path << " past " << end;
      EXPECT_EQ(past.message().find(path + " "), 0u) << past;
    }
  }
  EXPECT_GE(ranged, 15);  // batch_size, ring_slots, partitions, exchange, ...
  // What the settings JSON says is what the session's defaults are.
  const v1::SessionSpec& d = SessionDefaults();
  EXPECT_EQ(settings["ring_slots"]["default"], d.ring_slots());
  EXPECT_EQ(settings["partitions"]["default"], d.partitions());
  EXPECT_FLOAT_EQ(settings["exchange"]["default"].get<float>(), d.exchange());
  EXPECT_EQ(settings["image_size"]["preset"], true);
  EXPECT_EQ(settings["client_decode.max_bytes"]["default"], d.client_decode().max_bytes());
  EXPECT_FALSE(settings.contains("shuffle"));  // No default but false, no range.
  EXPECT_EQ(SettingText("ring_slots"), "2..256; default 4");
  EXPECT_EQ(SettingText("world_size"), "at least 1; default 1");
  EXPECT_EQ(SettingText("exchange"), "0..1; default 0.05");
  EXPECT_EQ(SettingText("shuffle"), "");
}

TEST(SchemaTest, NaNAndUnsetValues) {
  v1::SessionSpec spec;
  EXPECT_FALSE(CheckRanges(spec).ok());  // batch_size 0: no presence, checked.
  spec.set_batch_size(1);
  EXPECT_TRUE(CheckRanges(spec).ok());  // Unset settings with presence: not checked.
  spec.set_exchange(std::nanf(""));
  EXPECT_EQ(CheckRanges(spec).message(), "exchange nan must be in 0..1");
  spec.clear_exchange();
  spec.set_start_epoch((uint64_t{1} << 62) + 1);  // Not 2^62 to a double.
  EXPECT_EQ(CheckRanges(spec).message(),
            "start_epoch 4611686018427387905 must be at most 4611686018427387904");
}

TEST(SchemaTest, SessionDefaultsSkipThePresetsSettingsOfACustomPipeline) {
  v1::SessionSpec spec;
  spec.add_fields()->set_name("x");
  spec.set_ring_slots(8);
  ASSERT_TRUE(ApplySessionDefaults(&spec).ok());
  EXPECT_FALSE(spec.has_image_size());
  EXPECT_EQ(spec.mean_size(), 0);
  EXPECT_EQ(spec.ring_slots(), 8u);  // Given.
  EXPECT_EQ(spec.partitions(), SessionDefaults().partitions());
  EXPECT_FALSE(spec.has_client_decode());  // Absent messages stay absent.
  v1::SessionSpec preset;
  ASSERT_TRUE(ApplySessionDefaults(&preset).ok());
  EXPECT_EQ(preset.image_size(), 224u);
  EXPECT_FLOAT_EQ(preset.std(2), 0.225f);
}

}  // namespace
}  // namespace stoker
