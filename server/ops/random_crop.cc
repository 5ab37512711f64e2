// random_crop: a random width x height window in torchvision's draw order
// (top, then left); a shorter side is padded evenly (pad_if_needed).
#include "server/ops/spatial.h"

namespace stoker {
namespace {

class RandomCropKind : public SpatialOp {
 public:
  v1::Op::OpCase op_case() const override { return v1::Op::kRandomCrop; }

  absl::Status Check(v1::Op* op, const std::vector<FieldPlan*>&,
                     OpTraits* traits) const override {
    const v1::RandomCropOp& c = op->random_crop();
    traits->size = {static_cast<int>(c.width()), static_cast<int>(c.height())};
    traits->random = true;
    return CheckSize(c.width(), c.height());
  }

  void Draw(const v1::Op& op, SampleDraw& d) const override {
    const Canvas& base = (*d.canvases)[d.fields[0]];
    const int w = static_cast<int>(op.random_crop().width());
    const int h = static_cast<int>(op.random_crop().height());
    const int top = base.h >= h ? static_cast<int>(d.rng.Below(base.h - h + 1))
                                : -((h - base.h) / 2);
    const int left = base.w >= w ? static_cast<int>(d.rng.Below(base.w - w + 1))
                                 : -((w - base.w) / 2);
    for (int i : d.fields) (*d.canvases)[i].Crop(left, top, w, h);
  }
};

}  // namespace

STOKER_DEFINE_OP(RandomCrop, RandomCropKind)

}  // namespace stoker
