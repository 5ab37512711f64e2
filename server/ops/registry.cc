// The op registry and what every op shares.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "server/ops/op.h"
#include "proto/spec_util.h"

namespace stoker {

#define STOKER_OP(name) const OpKind& name();
#include "server/ops/ops.def"
#undef STOKER_OP

bool FieldPlan::is_float() const {
  return shm::DTypeIsFloat(dtype);
}

const char* KindName(v1::FieldSpec::Kind k) {
  switch (k) {
    case v1::FieldSpec::KIND_IMAGE: return "image";
    case v1::FieldSpec::KIND_MASK: return "mask";
    case v1::FieldSpec::KIND_LABEL: return "label";
    case v1::FieldSpec::KIND_ARRAY: return "array";
    case v1::FieldSpec::KIND_ENCODED: return "encoded";
    default: return "unspecified";
  }
}

void SampleDraw::Add(const Effect& e) const {
  if (effects == nullptr) return;
  for (int i : fields) (*effects)[i].push_back(e);
}

const std::vector<const OpKind*>& AllOps() {
  static const std::vector<const OpKind*> all = {
#define STOKER_OP(name) &name(),
#include "server/ops/ops.def"
#undef STOKER_OP
  };
  return all;
}

const OpKind* FindOp(v1::Op::OpCase op_case) {
  for (const OpKind* k : AllOps()) {
    if (k->op_case() == op_case) return k;
  }
  return nullptr;
}

std::string OpName(const v1::Op& op) {
  const auto* f = op.GetDescriptor()->FindFieldByNumber(op.op_case());
  return f == nullptr ? "none" : f->name();
}

absl::Status CheckSize(uint32_t width, uint32_t height) {
  if (width == 0 || height == 0 || width > kMaxSide || height > kMaxSide)
    return absl::InvalidArgumentError(absl::StrCat("width and height must be in 1..", kMaxSide));
  return absl::OkStatus();
}

void AffineValuesOp::ApplyValues(const Effect& e, const FieldPlan&, float* v,
                                 uint64_t n) const {
  const float a = static_cast<float>(e.v[0]), b = static_cast<float>(e.v[1]);
  for (uint64_t k = 0; k < n; ++k) v[k] = v[k] * a + b;
}

absl::Status CheckProbability(float p) {
  if (!(p >= 0 && p <= 1)) return absl::InvalidArgumentError("probability must be in 0..1");
  return absl::OkStatus();
}

absl::Status CheckRange(const v1::Range& r, double lo, double hi, const char* what) {
  if (!(std::isfinite(r.min()) && std::isfinite(r.max()) && lo <= r.min() &&
        r.min() <= r.max() && r.max() <= hi))
    return absl::InvalidArgumentError(absl::StrCat(
        what, " [", r.min(), ", ", r.max(), "] must satisfy ", lo, " <= min <= max <= ", hi));
  return absl::OkStatus();
}

}  // namespace stoker
