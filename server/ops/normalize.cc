// normalize: (x / 255 - mean) / std per channel for float images (1 or C
// values), (x - mean) / std for float arrays (1 value). Folded into the
// field's conversion; nothing is drawn.
#include "absl/strings/str_cat.h"
#include "server/ops/op.h"

namespace stoker {
namespace {

class NormalizeKind : public OpKind {
 public:
  v1::Op::OpCase op_case() const override { return v1::Op::kNormalize; }
  bool Fits(const FieldPlan& f) const override {
    return (f.kind == v1::FieldSpec::KIND_IMAGE || f.kind == v1::FieldSpec::KIND_ARRAY) &&
           f.is_float();
  }
  const char* fits() const override { return "float32/float16 images and arrays"; }

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
        f->normalize = true;
        f->norm.scale[0] = 1.0f / n.std(0);
        f->norm.offset[0] = -n.mean(0) / n.std(0);
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
        f->norm.scale[ch] = 1.0f / (255.0f * s);
        f->norm.offset[ch] = -m / s;
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace

STOKER_DEFINE_OP(Normalize, NormalizeKind)

}  // namespace stoker
