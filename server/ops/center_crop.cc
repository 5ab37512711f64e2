// center_crop: torchvision's CenterCrop (offsets rounded half to even; a
// smaller picture is padded evenly).
#include "server/ops/spatial.h"

namespace stoker {
namespace {

class CenterCropKind : public SpatialOp {
 public:
  v1::Op::OpCase op_case() const override { return v1::Op::kCenterCrop; }

  absl::Status Check(v1::Op* op, const std::vector<FieldPlan*>&,
                     OpTraits* traits) const override {
    const v1::CenterCropOp& c = op->center_crop();
    traits->size = {static_cast<int>(c.width()), static_cast<int>(c.height())};
    return CheckSize(c.width(), c.height());
  }

  void Draw(const v1::Op& op, SampleDraw& d) const override {
    for (int i : d.fields) {
      (*d.canvases)[i].CenterCrop(op.center_crop().width(), op.center_crop().height());
    }
  }
};

}  // namespace

STOKER_DEFINE_OP(CenterCrop, CenterCropKind)

}  // namespace stoker
