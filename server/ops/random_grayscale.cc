// random_grayscale: torchvision's RandomGrayscale on image fields: with
// `probability` a sample's picture becomes rgb_to_grayscale
// in every colour channel (RGBA keeps alpha; gray pictures are unchanged).
#include "server/ops/op.h"
#include "server/ops/pixels.h"

namespace stoker {
namespace {

class RandomGrayscaleKind : public PixelOp {
 public:
  v1::Op::OpCase op_case() const override { return v1::Op::kRandomGrayscale; }

  absl::Status Check(v1::Op* op, const std::vector<FieldPlan*>&,
                     OpTraits* traits) const override {
    v1::RandomGrayscaleOp* g = op->mutable_random_grayscale();
    if (absl::Status s = CheckProbability(g->probability()); !s.ok()) return s;
    traits->random = true;
    return absl::OkStatus();
  }

  void Draw(const v1::Op& op, SampleDraw& d) const override {
    if (d.rng.Uniform01() < op.random_grayscale().probability()) d.Add(Effect{this, &op, {}});
  }

  void ApplyPixels(const Effect&, const FieldPlan& f, uint8_t* hwc) const override {
    const int c = f.channels;
    if (c < 3) return;
    const size_t n = static_cast<size_t>(f.width) * f.height;
    for (size_t i = 0; i < n; ++i) {
      uint8_t* px = hwc + i * c;
      px[0] = px[1] = px[2] = Luma(px);
    }
  }
};

}  // namespace

STOKER_DEFINE_OP(RandomGrayscale, RandomGrayscaleKind)

}  // namespace stoker
