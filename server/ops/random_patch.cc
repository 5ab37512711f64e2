// random_patch: a random window of `shape` (the field's declared shape) of
// every array field it names, one start per sample shared by them (an
// image volume and its label volume stay aligned): drawn uniformly, or
// with label_bias around a voxel of the label array's foreground or
// background (MONAI's RandCropByPosNegLabel).
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/ops/op.h"

namespace stoker {
namespace {

class RandomPatchKind : public OpKind {
 public:
  v1::Op::OpCase op_case() const override { return v1::Op::kRandomPatch; }
  bool Fits(const FieldPlan& f) const override { return f.kind == v1::FieldSpec::KIND_ARRAY; }
  const char* fits() const override { return "arrays"; }

  absl::Status Check(v1::Op* op, const std::vector<FieldPlan*>& fields,
                     OpTraits* traits) const override {
    const auto& shape = op->random_patch().shape();
    for (FieldPlan* f : fields) {
      if (static_cast<size_t>(shape.size()) != f->shape.size() ||
          !std::equal(shape.begin(), shape.end(), f->shape.begin()))
        return absl::InvalidArgumentError(absl::StrCat(
            "patch [", absl::StrJoin(shape, ", "), "] differs from field '", f->name, "' [",
            absl::StrJoin(f->shape, ", "), "]"));
      f->patch.assign(shape.begin(), shape.end());
    }
    traits->random = true;
    if (!op->random_patch().has_label_bias()) return absl::OkStatus();
    return CheckBias(op->mutable_random_patch()->mutable_label_bias(), fields, traits);
  }

  void Draw(const v1::Op& op, SampleDraw& d) const override {
    if (d.shape == nullptr) return;
    const std::vector<uint64_t>& shape = *d.shape;
    const std::vector<uint64_t>& patch = d.plans[d.fields[0]].patch;
    std::vector<uint64_t> start(shape.size(), 0);
    const size_t dims = std::min(shape.size(), patch.size());
    if (op.random_patch().has_label_bias() && d.foreground != nullptr) {
      const v1::LabelBias& bias = op.random_patch().label_bias();
      uint64_t voxel = d.foreground->Draw(d.rng, bias.pos() / (bias.pos() + bias.neg()));
      // Row-major: the last dimension varies fastest.
      for (size_t k = shape.size(); k-- > 0;) {
        const uint64_t at = voxel % shape[k];
        voxel /= shape[k];
        if (k >= dims || shape[k] <= patch[k]) continue;
        const uint64_t half = patch[k] / 2;
        start[k] = std::min(at > half ? at - half : 0, shape[k] - patch[k]);
      }
    } else {
      for (size_t k = 0; k < dims; ++k) {
        start[k] = shape[k] > patch[k] ? d.rng.Below(shape[k] - patch[k] + 1) : 0;
      }
    }
    for (int i : d.fields) (*d.starts)[i] = start;
  }

 private:
  // Checks label_bias; the label field must be one the op patches.
  static absl::Status CheckBias(v1::LabelBias* bias, const std::vector<FieldPlan*>& fields,
                                OpTraits* traits) {
    if (!(std::isfinite(bias->pos()) && std::isfinite(bias->neg()) && bias->pos() >= 0 &&
          bias->neg() >= 0 && bias->pos() + bias->neg() > 0))
      return absl::InvalidArgumentError(absl::StrCat(
          "label_bias pos ", bias->pos(), " and neg ", bias->neg(),
          " must be finite, at least 0, and not both 0"));
    for (const FieldPlan* f : fields) {
      if (f->name != bias->field()) continue;
      traits->label_file = static_cast<int>(f->file);
      return absl::OkStatus();
    }
    std::vector<std::string> names;
    for (const FieldPlan* f : fields) names.push_back(absl::StrCat("'", f->name, "'"));
    return absl::InvalidArgumentError(absl::StrCat(
        "label_bias field '", bias->field(), "' is not one the op patches (",
        absl::StrJoin(names, ", "), ")"));
  }
};

}  // namespace

STOKER_DEFINE_OP(RandomPatch, RandomPatchKind)

}  // namespace stoker
