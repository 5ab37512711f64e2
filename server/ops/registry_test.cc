// The registry: every op the spec can name has exactly one unit.
#include <set>

#include "gtest/gtest.h"
#include <cmath>

#include "proto/spec_util.h"
#include "server/ops/op.h"

namespace stoker {
namespace {

TEST(OpRegistryTest, EveryOpCaseOfTheSpecHasOneUnit) {
  const google::protobuf::OneofDescriptor* oneof =
      v1::Op::descriptor()->FindOneofByName("op");
  ASSERT_NE(oneof, nullptr);
  std::set<int> registered;
  for (const OpKind* k : AllOps()) {
    EXPECT_TRUE(registered.insert(k->op_case()).second) << "registered twice: " << k->op_case();
  }
  for (int i = 0; i < oneof->field_count(); ++i) {
    const int number = oneof->field(i)->number();
    EXPECT_EQ(registered.count(number), 1u) << oneof->field(i)->name() << " has no unit";
    EXPECT_NE(FindOp(static_cast<v1::Op::OpCase>(number)), nullptr);
  }
  EXPECT_EQ(registered.size(), static_cast<size_t>(oneof->field_count()));
  EXPECT_EQ(FindOp(v1::Op::OP_NOT_SET), nullptr);
}

TEST(OpRegistryTest, NamesAndRanges) {
  v1::Op op;
  EXPECT_EQ(OpName(op), "none");
  op.mutable_random_crop();
  EXPECT_EQ(OpName(op), "random_crop");
  v1::Range r;
  r.set_min(0.5f);
  r.set_max(1.5f);
  EXPECT_TRUE(CheckRange(r, 0, 2, "brightness").ok());
  EXPECT_EQ(CheckRange(r, 0, 1, "brightness").code(), absl::StatusCode::kInvalidArgument);
  r.set_min(2);
  EXPECT_EQ(CheckRange(r, 0, 3, "x").code(), absl::StatusCode::kInvalidArgument);  // min > max.
  r.set_min(std::nanf(""));
  EXPECT_EQ(CheckRange(r, 0, 3, "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckSize(16384, 1).ok());
  EXPECT_FALSE(CheckSize(0, 1).ok());
  EXPECT_FALSE(CheckSize(16385, 1).ok());
  EXPECT_EQ(DTypeName(RingDType(v1::DTYPE_FLOAT16)), "float16");
}

}  // namespace
}  // namespace stoker
