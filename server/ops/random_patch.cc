// random_patch: a random window of `shape` (the field's declared shape) of
// every array field it names, one start per sample shared by them (an
// image volume and its label volume stay aligned).
#include <algorithm>

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
    return absl::OkStatus();
  }

  void Draw(const v1::Op&, SampleDraw& d) const override {
    if (d.shape == nullptr) return;
    const std::vector<uint64_t>& shape = *d.shape;
    const std::vector<uint64_t>& patch = d.plans[d.fields[0]].patch;
    std::vector<uint64_t> start(shape.size(), 0);
    for (size_t k = 0; k < shape.size() && k < patch.size(); ++k) {
      start[k] = shape[k] > patch[k] ? d.rng.Below(shape[k] - patch[k] + 1) : 0;
    }
    for (int i : d.fields) (*d.starts)[i] = start;
  }
};

}  // namespace

STOKER_DEFINE_OP(RandomPatch, RandomPatchKind)

}  // namespace stoker
