// What the geometric ops (resize, crops, flip) share: they apply to images
// and masks, and change only the canvas.
#ifndef STOKER_SERVER_OPS_SPATIAL_H_
#define STOKER_SERVER_OPS_SPATIAL_H_

#include "server/ops/op.h"

namespace stoker {

class SpatialOp : public OpKind {
 public:
  bool Fits(const FieldPlan& f) const override { return f.spatial(); }
  const char* fits() const override { return "images and masks"; }

 protected:
  // Images of the step take `interp`; masks stay nearest.
  static void Interpolate(SampleDraw& d, v1::Interpolation interp) {
    const Filter filter = interp == v1::INTERPOLATION_BICUBIC   ? Filter::kBicubic
                          : interp == v1::INTERPOLATION_NEAREST ? Filter::kNearest
                                                                : Filter::kBilinear;
    for (int i : d.fields) {
      if (d.plans[i].kind == v1::FieldSpec::KIND_IMAGE) (*d.canvases)[i].filter = filter;
    }
  }
};

}  // namespace stoker

#endif  // STOKER_SERVER_OPS_SPATIAL_H_
