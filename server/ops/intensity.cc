// intensity: with `probability`, float array values x become x * a + b, a
// drawn in `scale` and b in `shift` per sample (MONAI's RandScaleIntensity,
// a = 1 + factor, and RandShiftIntensity), in the value stage.
#include "absl/strings/str_cat.h"
#include "server/ops/op.h"

namespace stoker {
namespace {

constexpr double kMost = 1e6;  // |scale| and |shift| bounds.

class IntensityKind : public AffineValuesOp {
 public:
  v1::Op::OpCase op_case() const override { return v1::Op::kIntensity; }
  bool Fits(const FieldPlan& f) const override {
    return f.kind == v1::FieldSpec::KIND_ARRAY && f.is_float();
  }
  const char* fits() const override { return "{float} arrays"; }

  absl::Status Check(v1::Op* op, const std::vector<FieldPlan*>&,
                     OpTraits* traits) const override {
    v1::IntensityOp* in = op->mutable_intensity();
    if (absl::Status s = CheckProbability(in->probability()); !s.ok()) return s;
    if (!in->has_scale() && !in->has_shift())
      return absl::InvalidArgumentError("changes nothing: set scale, shift or both");
    if (!in->has_scale()) {
      in->mutable_scale()->set_min(1);
      in->mutable_scale()->set_max(1);
    }
    if (absl::Status s = CheckRange(in->scale(), -kMost, kMost, "scale"); !s.ok()) return s;
    if (absl::Status s = CheckRange(in->shift(), -kMost, kMost, "shift"); !s.ok()) return s;
    traits->random = true;
    return absl::OkStatus();
  }

  // v: {a, b}.
  void Draw(const v1::Op& op, SampleDraw& d) const override {
    const v1::IntensityOp& in = op.intensity();
    if (!(d.rng.Uniform01() < in.probability())) return;
    const double a = d.rng.Uniform(in.scale().min(), in.scale().max());
    const double b = d.rng.Uniform(in.shift().min(), in.shift().max());
    d.Add(Effect{this, &op, {a, b}});
  }
};

}  // namespace

STOKER_DEFINE_OP(Intensity, IntensityKind)

}  // namespace stoker
