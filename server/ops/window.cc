// window: float array values in [min, max] mapped linearly onto
// [out_min, out_max] and clipped to it (MONAI's ScaleIntensityRange with
// clip: a CT window, then 0..1), in the value stage; nothing is drawn.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "server/ops/op.h"

namespace stoker {
namespace {

class WindowKind : public OpKind {
 public:
  v1::Op::OpCase op_case() const override { return v1::Op::kWindow; }
  bool Fits(const FieldPlan& f) const override {
    return f.kind == v1::FieldSpec::KIND_ARRAY && f.is_float();
  }
  const char* fits() const override { return "{float} arrays"; }

  absl::Status Check(v1::Op* op, const std::vector<FieldPlan*>&, OpTraits*) const override {
    v1::WindowOp* w = op->mutable_window();
    const bool finite = std::isfinite(w->min()) && std::isfinite(w->max()) &&
                        std::isfinite(w->out_min()) && std::isfinite(w->out_max());
    if (!finite || !(w->min() < w->max()) || !(w->out_min() < w->out_max()))
      return absl::InvalidArgumentError(
          absl::StrCat("window [", w->min(), ", ", w->max(), "] onto [", w->out_min(), ", ",
                       w->out_max(), "]: both must be finite with min < max"));
    return absl::OkStatus();
  }

  void Draw(const v1::Op& op, SampleDraw& d) const override { d.Add(Effect{this, &op, {}}); }

  bool values() const override { return true; }
  // As ScaleIntensityRange on float32: (x - min) / (max - min), times
  // (out_max - out_min), plus out_min, clipped (NaN stays NaN).
  void ApplyValues(const Effect& e, const FieldPlan&, float* v, uint64_t n) const override {
    const v1::WindowOp& w = e.op->window();
    const float lo = w.min(), span = static_cast<float>(double{w.max()} - w.min());
    const float out_lo = w.out_min(), out_hi = w.out_max();
    const float out_span = static_cast<float>(double{w.out_max()} - w.out_min());
    for (uint64_t k = 0; k < n; ++k) {
      const float x = (v[k] - lo) / span * out_span + out_lo;
      v[k] = std::min(std::max(x, out_lo), out_hi);
    }
  }
};

}  // namespace

STOKER_DEFINE_OP(Window, WindowKind)

}  // namespace stoker
