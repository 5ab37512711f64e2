// random_resized_crop: torchvision's RandomResizedCrop (area scale and
// aspect ratio ranges, its 10 tries and fallback), drawn from the first
// field's size; images take the op's interpolation, masks stay nearest.
#include "server/ops/spatial.h"

namespace stoker {
namespace {

class RandomResizedCropKind : public SpatialOp {
 public:
  v1::Op::OpCase op_case() const override { return v1::Op::kRandomResizedCrop; }

  absl::Status Check(v1::Op* op, const std::vector<FieldPlan*>&,
                     OpTraits* traits) const override {
    v1::RandomResizedCropOp* r = op->mutable_random_resized_crop();
    traits->size = {static_cast<int>(r->width()), static_cast<int>(r->height())};
    traits->random = true;
    if (absl::Status s = CheckSize(r->width(), r->height()); !s.ok()) return s;
    if (!(r->scale_min() > 0 && r->scale_min() <= r->scale_max() && r->scale_max() <= 1))
      return absl::InvalidArgumentError("scale must satisfy 0 < scale_min <= scale_max <= 1");
    if (!(r->ratio_min() > 0 && r->ratio_min() <= r->ratio_max()))
      return absl::InvalidArgumentError("ratio must satisfy 0 < ratio_min <= ratio_max");
    return absl::OkStatus();
  }

  void Draw(const v1::Op& op, SampleDraw& d) const override {
    const v1::RandomResizedCropOp& r = op.random_resized_crop();
    const Canvas& base = (*d.canvases)[d.fields[0]];
    const CropBox b = RandomResizedCropWindow(base.w, base.h, r.scale_min(), r.scale_max(),
                                              r.ratio_min(), r.ratio_max(), d.rng);
    for (int i : d.fields) {
      Canvas& k = (*d.canvases)[i];
      k.Crop(static_cast<int>(b.x), static_cast<int>(b.y), static_cast<int>(b.w),
             static_cast<int>(b.h));
      k.Resize(r.width(), r.height());
    }
    Interpolate(d, r.interpolation());
  }
};

}  // namespace

STOKER_DEFINE_OP(RandomResizedCrop, RandomResizedCropKind)

}  // namespace stoker
