// flip: mirrors horizontally (or vertically) with `probability`, one draw
// per sample shared by the fields it names. (Defaults: spec.proto's.)
#include "server/ops/spatial.h"

namespace stoker {
namespace {

class FlipKind : public SpatialOp {
 public:
  v1::Op::OpCase op_case() const override { return v1::Op::kFlip; }

  absl::Status Check(v1::Op* op, const std::vector<FieldPlan*>&,
                     OpTraits* traits) const override {
    if (absl::Status s = CheckProbability(op->flip().probability()); !s.ok()) return s;
    traits->random = true;
    return absl::OkStatus();
  }

  void Draw(const v1::Op& op, SampleDraw& d) const override {
    if (!(d.rng.Uniform01() < op.flip().probability())) return;
    for (int i : d.fields) {
      Canvas& k = (*d.canvases)[i];
      op.flip().vertical() ? k.FlipVertical() : k.FlipHorizontal();
    }
  }
};

}  // namespace

STOKER_DEFINE_OP(Flip, FlipKind)

}  // namespace stoker
