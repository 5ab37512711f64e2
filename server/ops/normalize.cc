// normalize: (x / 255 - mean) / std per channel for float images (1 or C
// values), folded into the field's conversion; (x - mean) / std for float
// arrays (1 value), in their value stage in op order. Nothing is drawn.
// An image's mean and std are on the 0..1 scale (mean in 0..1, std in
// (0, 1]), as torchvision's after ToTensor: values on the 0..255 scale
// would leave every pixel near -2, so they are refused naming the scale.
#include <string>

#include "absl/strings/str_cat.h"
#include "server/ops/op.h"

namespace stoker {
namespace {

class NormalizeKind : public AffineValuesOp {
 public:
  v1::Op::OpCase op_case() const override { return v1::Op::kNormalize; }
  bool Fits(const FieldPlan& f) const override {
    return (f.kind == v1::FieldSpec::KIND_IMAGE || f.kind == v1::FieldSpec::KIND_ARRAY) &&
           f.is_float();
  }
  const char* fits() const override { return "{float} images and arrays"; }

  absl::Status Check(v1::Op* op, const std::vector<FieldPlan*>& fields,
                     OpTraits*) const override {
    const v1::NormalizeOp& n = op->normalize();
    auto positive = [](float s) {
      return s > 0 ? absl::OkStatus()
                   : absl::InvalidArgumentError(absl::StrCat("std values must be > 0, got ", s));
    };
    for (FieldPlan* f : fields) {
      if (f->kind == v1::FieldSpec::KIND_ARRAY) {
        if (n.mean_size() != 1 || n.std_size() != 1)
          return absl::InvalidArgumentError(absl::StrCat(
              "mean and std need 1 value each for array field '", f->name, "'"));
        if (absl::Status s = positive(n.std(0)); !s.ok()) return s;
        continue;
      }
      const int c = f->channels;
      if ((n.mean_size() != 1 && n.mean_size() != c) || (n.std_size() != 1 && n.std_size() != c))
        return absl::InvalidArgumentError(absl::StrCat("mean and std need 1 or ", c,
                                                       " values for field '", f->name, "'"));
      for (int ch = 0; ch < c; ++ch) {
        const float m = n.mean(n.mean_size() == 1 ? 0 : ch);
        const float s = n.std(n.std_size() == 1 ? 0 : ch);
        if (absl::Status st = positive(s); !st.ok()) return st;
        if (!(m >= 0 && m <= 1) || s > 1) {
          // What to do: the value that is on the 0..255 scale, divided.
          const bool mean_high = m > 1;
          const std::string fix =
              mean_high || s > 1
                  ? absl::StrCat("; divide values on the 0..255 scale by 255 (",
                                 mean_high ? m : s, " -> ", (mean_high ? m : s) / 255, ")")
                  : "; a mean is a level within 0..1";
          return absl::InvalidArgumentError(absl::StrCat(
              "mean and std of image field '", f->name, "' are on the 0..1 scale of "
              "pixels / 255 (as torchvision's Normalize after ToTensor), got mean ", m,
              " and std ", s, fix));
        }
        f->norm.scale[ch] = 1.0f / (255.0f * s);
        f->norm.offset[ch] = -m / s;
      }
    }
    return absl::OkStatus();
  }

  // Array fields: v = {scale, offset}.
  void Draw(const v1::Op& op, SampleDraw& d) const override {
    if (d.effects == nullptr) return;
    const v1::NormalizeOp& n = op.normalize();
    for (int i : d.fields) {
      if (d.plans[i].kind != v1::FieldSpec::KIND_ARRAY) continue;
      const float scale = 1.0f / n.std(0), offset = -n.mean(0) / n.std(0);
      (*d.effects)[i].push_back(Effect{this, &op, {scale, offset}});
    }
  }
};

}  // namespace

STOKER_DEFINE_OP(Normalize, NormalizeKind)

}  // namespace stoker
