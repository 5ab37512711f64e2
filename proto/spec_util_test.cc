// The dtype table (shm/ring_data.h) against the schema's DType: one row per
// proto value, code = number + 1, the same name.
#include "proto/spec_util.h"

#include <string>

#include "absl/strings/ascii.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(DTypeTableTest, EveryProtoDTypeHasItsRowAndNoOther) {
  const google::protobuf::EnumDescriptor* e = v1::DType_descriptor();
  ASSERT_EQ(static_cast<size_t>(e->value_count()), shm::FieldDTypeCount());
  for (int i = 0; i < e->value_count(); ++i) {
    const auto proto = static_cast<v1::DType>(e->value(i)->number());
    const shm::DTypeInfo* row = shm::FindDType(RingDType(proto));
    ASSERT_NE(row, nullptr) << e->value(i)->name();
    EXPECT_EQ("DTYPE_" + absl::AsciiStrToUpper(row->name), e->value(i)->name());
    EXPECT_EQ(ProtoDType(row->code), proto);
    EXPECT_STREQ(DTypeName(row->code), row->name);
    EXPECT_GT(row->bytes, 0u);
  }
  EXPECT_EQ(shm::FindDType(0), nullptr);
  EXPECT_EQ(shm::DTypeBytes(99), 0u);
  EXPECT_STREQ(DTypeName(99), "unknown");
  static_assert(shm::DTypeBytes(shm::kDTypeInt64) == 8);
  static_assert(shm::DTypeIsFloat(shm::kDTypeBfloat16) && !shm::DTypeIsFloat(shm::kDTypeInt16));
  EXPECT_EQ(FloatDTypeNames(), "float32/float16/bfloat16");
  EXPECT_TRUE(ImageDTypeOk(v1::DTYPE_BFLOAT16));
  EXPECT_FALSE(ImageDTypeOk(v1::DTYPE_INT16));
}

// Remote is a property of the source kind in the schema: the s3 kind's
// alone today, and the DatasetSpec's kinds are its `source` fields.
TEST(SpecUtilTest, RemoteIsTheSourceKindsSchemaOption) {
  v1::DatasetSpec ds;
  EXPECT_FALSE(IsRemoteSource(ds));
  ds.mutable_s3()->set_url("s3://b/p/");
  EXPECT_TRUE(IsRemoteSource(ds));
  ds.mutable_webdataset()->set_path("/d");
  EXPECT_FALSE(IsRemoteSource(ds));
  const google::protobuf::OneofDescriptor* kinds =
      v1::DatasetSpec::descriptor()->FindOneofByName("source");
  int remote = 0;
  for (int i = 0; i < kinds->field_count(); ++i)
    remote += kinds->field(i)->message_type()->options().GetExtension(v1::remote);
  EXPECT_EQ(remote, 1);
}

}  // namespace
}  // namespace stoker
