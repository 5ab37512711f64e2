// rot90: with `probability`, array fields rotated by k x 90 degrees in the
// plane of `axes`, k drawn in 1..max_k, the same for every field it names
// (numpy.rot90(x, k, axes), MONAI's RandRotate90). The plane must be
// square in every field, so the shape is kept.
#include "absl/strings/str_cat.h"
#include "proto/spec_util.h"
#include "server/ops/op.h"
#include "server/ops/volume.h"
#include "shm/ring_data.h"

namespace stoker {
namespace {

class Rot90Kind : public OpKind {
 public:
  v1::Op::OpCase op_case() const override { return v1::Op::kRot90; }
  bool Fits(const FieldPlan& f) const override {
    return f.kind == v1::FieldSpec::KIND_ARRAY && f.shape.size() >= 2;
  }
  const char* fits() const override { return "arrays of 2 or more dimensions"; }

  absl::Status Check(v1::Op* op, const std::vector<FieldPlan*>& fields,
                     OpTraits* traits) const override {
    v1::Rot90Op* r = op->mutable_rot90();
    if (absl::Status s = CheckProbability(r->probability()); !s.ok()) return s;
    if (r->max_k() < 1 || r->max_k() > 3)
      return absl::InvalidArgumentError(absl::StrCat("max_k ", r->max_k(), " is not in 1..3"));
    if (r->axes_size() != 2 || r->axes(0) == r->axes(1))
      return absl::InvalidArgumentError("axes must be two different axes (a plane)");
    for (const FieldPlan* f : fields) {
      const size_t a = r->axes(0), b = r->axes(1);
      if (a >= f->shape.size() || b >= f->shape.size())
        return absl::InvalidArgumentError(absl::StrCat("axes [", a, ", ", b,
                                                       "] are not both axes of field '", f->name,
                                                       "' (", f->shape.size(), " dimensions)"));
      if (f->shape[a] != f->shape[b])
        return absl::InvalidArgumentError(absl::StrCat(
            "field '", f->name, "' is ", f->shape[a], " x ", f->shape[b], " in the plane of axes [",
            a, ", ", b, "]; a quarter turn keeps the shape only of a square plane"));
    }
    traits->random = true;
    return absl::OkStatus();
  }

  // v: {k}.
  void Draw(const v1::Op& op, SampleDraw& d) const override {
    if (!(d.rng.Uniform01() < op.rot90().probability())) return;
    const uint64_t k = 1 + d.rng.Below(op.rot90().max_k());
    d.Add(Effect{this, &op, {static_cast<double>(k)}});
  }

  void ApplyArray(const Effect& e, const FieldPlan& f, uint8_t* out) const override {
    Rot90(out, f.shape, shm::DTypeBytes(f.dtype), static_cast<uint32_t>(e.v[0]),
          e.op->rot90().axes(0), e.op->rot90().axes(1));
  }
};

}  // namespace

STOKER_DEFINE_OP(Rot90, Rot90Kind)

}  // namespace stoker
