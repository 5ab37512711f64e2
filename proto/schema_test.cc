// The schema's op defaults (every one parses, applying them fills only what
// a spec left unset, the JSON clients read carries each) and source kinds.
#include "proto/schema.h"

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

TEST(SchemaTest, SourceKindsAreTheDatasetSpecsSources) {
  EXPECT_EQ(nlohmann::json::parse(SourceKindsJson()),
            nlohmann::json({"folder", "list", "lmdb", "npy", "hdf5", "nifti", "webdataset", "s3"}));
}

}  // namespace
}  // namespace stoker
