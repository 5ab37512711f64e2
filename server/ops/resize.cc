// resize: the shorter or longer side to `size`, exact width x height, or a
// letterbox (longer side to size, centered on size x size, padded with
// `fill`). Images take the op's interpolation; masks stay nearest.
#include "server/ops/op.h"
#include "server/ops/spatial.h"

namespace stoker {
namespace {

class ResizeKind : public SpatialOp {
 public:
  v1::Op::OpCase op_case() const override { return v1::Op::kResize; }

  absl::Status Check(v1::Op* op, const std::vector<FieldPlan*>&,
                     OpTraits* traits) const override {
    const v1::ResizeOp& r = op->resize();
    if (r.mode() == v1::ResizeOp::MODE_EXACT) {
      if (r.width() == 0 || r.height() == 0 || r.width() > kMaxSide || r.height() > kMaxSide)
        return absl::InvalidArgumentError(absl::StrCat("exact needs width and height in 1..",
                                                       kMaxSide));
      traits->size = {static_cast<int>(r.width()), static_cast<int>(r.height())};
    } else {
      if (r.size() == 0 || r.size() > kMaxSide)
        return absl::InvalidArgumentError(absl::StrCat("size must be in 1..", kMaxSide));
      const int s = static_cast<int>(r.size());
      traits->size = r.mode() == v1::ResizeOp::MODE_LETTERBOX ? std::pair<int, int>{s, s}
                                                               : std::pair<int, int>{-1, -1};
    }
    if (r.fill() > 255) return absl::InvalidArgumentError("fill must be in 0..255");
    return absl::OkStatus();
  }

  void Draw(const v1::Op& op, SampleDraw& d) const override {
    const v1::ResizeOp& r = op.resize();
    const int s = static_cast<int>(r.size());
    for (int i : d.fields) {
      Canvas& k = (*d.canvases)[i];
      switch (r.mode()) {
        case v1::ResizeOp::MODE_EXACT: k.Resize(r.width(), r.height()); break;
        case v1::ResizeOp::MODE_LONGER: k.ResizeLonger(s); break;
        case v1::ResizeOp::MODE_LETTERBOX:
          k.Letterbox(s);
          k.fill = r.fill();
          break;
        default: k.ResizeShorter(s);
      }
    }
    Interpolate(d, r.interpolation());
  }
};

}  // namespace

STOKER_DEFINE_OP(Resize, ResizeKind)

}  // namespace stoker
