// random_erasing: torchvision's RandomErasing on image fields. With
// `probability` a rectangle of area `scale` x picture and aspect ratio h/w
// in `ratio` (drawn log-uniform) is filled with `value` (levels 0..255, one
// or per channel; none: 0; other defaults: spec.proto's),
// after torchvision's 10 tries (none fits: unchanged). Drawn on the first
// field's size; other fields of the step get the same rectangle scaled.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "server/ops/op.h"

namespace stoker {
namespace {

class RandomErasingKind : public PixelOp {
 public:
  v1::Op::OpCase op_case() const override { return v1::Op::kRandomErasing; }

  absl::Status Check(v1::Op* op, const std::vector<FieldPlan*>& fields,
                     OpTraits* traits) const override {
    v1::RandomErasingOp* e = op->mutable_random_erasing();
    if (absl::Status s = CheckProbability(e->probability()); !s.ok()) return s;
    if (absl::Status s = CheckRange(e->scale(), 0, 1, "scale"); !s.ok()) return s;
    if (absl::Status s = CheckRange(e->ratio(), 1e-3, 1e3, "ratio"); !s.ok()) return s;
    for (uint32_t v : e->value()) {
      if (v > 255) return absl::InvalidArgumentError(absl::StrCat("value ", v, " is not in 0..255"));
    }
    for (const FieldPlan* f : fields) {
      if (e->value_size() > 1 && e->value_size() != f->channels)
        return absl::InvalidArgumentError(absl::StrCat(
            "value needs 1 or ", f->channels, " levels for field '", f->name, "'"));
    }
    traits->random = true;
    return absl::OkStatus();
  }

  // v: top, left, height, width, and the size they were drawn on.
  void Draw(const v1::Op& op, SampleDraw& d) const override {
    const v1::RandomErasingOp& e = op.random_erasing();
    if (!(d.rng.Uniform01() < e.probability())) return;
    const FieldPlan& first = d.plans[d.fields[0]];
    const int height = first.height, width = first.width;
    const double area = static_cast<double>(height) * width;
    const double lo = std::log(e.ratio().min()), hi = std::log(e.ratio().max());
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double erase = area * d.rng.Uniform(e.scale().min(), e.scale().max());
      const double aspect = std::exp(d.rng.Uniform(lo, hi));
      const int h = static_cast<int>(std::nearbyint(std::sqrt(erase * aspect)));
      const int w = static_cast<int>(std::nearbyint(std::sqrt(erase / aspect)));
      if (!(h < height && w < width)) continue;
      const int top = static_cast<int>(d.rng.Below(height - h + 1));
      const int left = static_cast<int>(d.rng.Below(width - w + 1));
      d.Add(Effect{this, &op, {double(top), double(left), double(h), double(w),
                               double(height), double(width)}});
      return;
    }
  }

  void ApplyPixels(const Effect& e, const FieldPlan& f, uint8_t* hwc) const override {
    const double sy = f.height / e.v[4], sx = f.width / e.v[5];
    const int top = static_cast<int>(e.v[0] * sy), left = static_cast<int>(e.v[1] * sx);
    const int bottom = std::min(f.height, static_cast<int>(std::lround((e.v[0] + e.v[2]) * sy)));
    const int right = std::min(f.width, static_cast<int>(std::lround((e.v[1] + e.v[3]) * sx)));
    const auto& value = e.op->random_erasing().value();
    const int c = f.channels;
    uint8_t fill[4] = {0, 0, 0, 0};
    for (int k = 0; k < c; ++k) {
      fill[k] = static_cast<uint8_t>(value.empty() ? 0 : value[value.size() == 1 ? 0 : k]);
    }
    for (int y = top; y < bottom; ++y) {
      uint8_t* row = hwc + (static_cast<size_t>(y) * f.width + left) * c;
      for (int x = left; x < right; ++x, row += c) {
        for (int k = 0; k < c; ++k) row[k] = fill[k];
      }
    }
  }
};

}  // namespace

STOKER_DEFINE_OP(RandomErasing, RandomErasingKind)

}  // namespace stoker
