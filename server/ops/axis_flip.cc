// axis_flip: each of `axes` of array fields reversed with `probability`,
// drawn per axis and sample, the same for every field it names (a scan and
// its label volume stay aligned): MONAI's RandFlip per axis.
#include "absl/strings/str_cat.h"
#include "proto/spec_util.h"
#include "server/ops/op.h"
#include "server/ops/volume.h"
#include "shm/ring_data.h"

namespace stoker {
namespace {

class AxisFlipKind : public OpKind {
 public:
  v1::Op::OpCase op_case() const override { return v1::Op::kAxisFlip; }
  bool Fits(const FieldPlan& f) const override { return f.kind == v1::FieldSpec::KIND_ARRAY; }
  const char* fits() const override { return "arrays"; }

  absl::Status Check(v1::Op* op, const std::vector<FieldPlan*>& fields,
                     OpTraits* traits) const override {
    v1::AxisFlipOp* a = op->mutable_axis_flip();
    if (absl::Status s = CheckProbability(a->probability()); !s.ok()) return s;
    const size_t dims = fields[0]->shape.size();
    for (const FieldPlan* f : fields) {
      if (f->shape.size() != dims)
        return absl::InvalidArgumentError(absl::StrCat(
            "fields '", fields[0]->name, "' and '", f->name, "' differ in dimensions (", dims,
            " and ", f->shape.size(), ")"));
    }
    if (a->axes().empty()) {
      for (size_t k = 0; k < dims; ++k) a->add_axes(static_cast<uint32_t>(k));
    }
    for (uint32_t axis : a->axes()) {
      if (axis >= dims)
        return absl::InvalidArgumentError(
            absl::StrCat("axis ", axis, " is not one of field '", fields[0]->name, "' (", dims,
                         " dimensions)"));
    }
    traits->random = true;
    return absl::OkStatus();
  }

  // v: the axes flipped.
  void Draw(const v1::Op& op, SampleDraw& d) const override {
    Effect e{this, &op, {}};
    for (uint32_t axis : op.axis_flip().axes()) {
      if (d.rng.Uniform01() < op.axis_flip().probability()) e.v.push_back(axis);
    }
    if (!e.v.empty()) d.Add(e);
  }

  void ApplyArray(const Effect& e, const FieldPlan& f, uint8_t* out) const override {
    for (double axis : e.v) {
      FlipAxis(out, f.shape, shm::DTypeBytes(f.dtype), static_cast<size_t>(axis));
    }
  }
};

}  // namespace

STOKER_DEFINE_OP(AxisFlip, AxisFlipKind)

}  // namespace stoker
