// spec_augment: SpecAugment's time and frequency masking on 2-D float array
// fields (torchaudio's TimeMasking and FrequencyMasking, drawn per sample):
// `time_masks` bands of width drawn in [0, time_width) along the time axis
// and `freq_masks` of width in [0, freq_width) along the frequency axis,
// each at a start drawn uniformly in what remains, set to `value` in the
// field's units (after a normalize). Fields are [time, freq] (rows are
// frames), or [freq, time] with `freq_first`.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "server/imaging/elements.h"
#include "proto/spec_util.h"
#include "server/ops/op.h"

namespace stoker {
namespace {

constexpr uint32_t kMaxMasks = 16;

class SpecAugmentKind : public OpKind {
 public:
  v1::Op::OpCase op_case() const override { return v1::Op::kSpecAugment; }
  bool Fits(const FieldPlan& f) const override {
    return f.kind == v1::FieldSpec::KIND_ARRAY && f.shape.size() == 2 && f.is_float();
  }
  const char* fits() const override { return "2-D {float} arrays"; }

  absl::Status Check(v1::Op* op, const std::vector<FieldPlan*>& fields,
                     OpTraits* traits) const override {
    v1::SpecAugmentOp* m = op->mutable_spec_augment();
    if (m->time_width() == 0) m->set_time_masks(0);  // No band on that axis.
    if (m->freq_width() == 0) m->set_freq_masks(0);
    const v1::SpecAugmentOp& s = *m;
    if (s.time_masks() > kMaxMasks || s.freq_masks() > kMaxMasks)
      return absl::InvalidArgumentError(absl::StrCat("at most ", kMaxMasks, " masks per axis"));
    if (s.time_masks() * s.time_width() == 0 && s.freq_masks() * s.freq_width() == 0)
      return absl::InvalidArgumentError(
          "masks nothing: set time_masks and time_width, or freq_masks and freq_width");
    for (const FieldPlan* f : fields) {
      const uint64_t time = f->shape[s.freq_first() ? 1 : 0];
      const uint64_t freq = f->shape[s.freq_first() ? 0 : 1];
      if (s.time_width() > time || s.freq_width() > freq)
        return absl::InvalidArgumentError(absl::StrCat(
            "time_width ", s.time_width(), " / freq_width ", s.freq_width(), " exceed field '",
            f->name, "' (", time, " frames x ", freq, " bins)"));
    }
    traits->random = true;
    return absl::OkStatus();
  }

  // v: [start, end) of each time mask, then of each frequency mask, drawn
  // as torchaudio's mask_along_axis on the first field's size.
  void Draw(const v1::Op& op, SampleDraw& d) const override {
    const v1::SpecAugmentOp& s = op.spec_augment();
    const FieldPlan& first = d.plans[d.fields[0]];
    Effect e{this, &op, {}};
    auto masks = [&](uint32_t count, uint32_t width, uint64_t size) {
      for (uint32_t k = 0; k < count; ++k) {
        const double w = d.rng.Uniform01() * width;
        const double start = d.rng.Uniform01() * (static_cast<double>(size) - w);
        const double begin = static_cast<double>(static_cast<uint64_t>(start));
        e.v.push_back(begin);
        e.v.push_back(begin + static_cast<double>(static_cast<uint64_t>(w)));
      }
    };
    masks(s.time_masks(), s.time_width(), first.shape[s.freq_first() ? 1 : 0]);
    masks(s.freq_masks(), s.freq_width(), first.shape[s.freq_first() ? 0 : 1]);
    d.Add(e);
  }

  void ApplyArray(const Effect& e, const FieldPlan& f, uint8_t* out) const override {
    const v1::SpecAugmentOp& s = e.op->spec_augment();
    const size_t elem = shm::DTypeBytes(f.dtype);
    uint8_t value[8];
    const float v = s.value();
    StoreFloats(&v, 1, shm::FromRingDType(f.dtype), value);
    const uint64_t rows = f.shape[0], cols = f.shape[1];
    auto fill = [&](uint64_t r, uint64_t c) {
      std::memcpy(out + (r * cols + c) * elem, value, elem);
    };
    for (size_t k = 0; k + 1 < e.v.size(); k += 2) {
      const bool time = k / 2 < s.time_masks();
      const bool along_rows = time != s.freq_first();  // Masks whole rows.
      const uint64_t limit = along_rows ? rows : cols;
      const uint64_t begin = static_cast<uint64_t>(e.v[k]);
      const uint64_t end = std::min(limit, static_cast<uint64_t>(e.v[k + 1]));
      for (uint64_t i = begin; i < end; ++i) {
        for (uint64_t j = 0; j < (along_rows ? cols : rows); ++j) {
          along_rows ? fill(i, j) : fill(j, i);
        }
      }
    }
  }
};

}  // namespace

STOKER_DEFINE_OP(SpecAugment, SpecAugmentKind)

}  // namespace stoker
