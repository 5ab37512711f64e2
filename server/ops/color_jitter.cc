// color_jitter: torchvision's ColorJitter on the rendered picture. Each set
// range gives a factor drawn per sample (brightness, contrast, saturation:
// 1 is unchanged; hue: a shift of the hue circle in -0.5..0.5), applied in
// an order drawn per sample, each as torchvision's functional op on a uint8
// tensor. RGBA keeps its alpha; a gray picture takes brightness and
// contrast (saturation and hue leave gray unchanged, as in torchvision).
#include <cmath>
#include <utility>

#include "server/ops/op.h"
#include "server/ops/pixels.h"

namespace stoker {
namespace {

enum Adjust { kBrightness, kContrast, kSaturation, kHue };

// adjust_hue of one pixel: to HSV, h += shift (mod 1), back, x 255
// truncated, with torchvision's float operations (_rgb2hsv / _hsv2rgb).
inline void ShiftHue(uint8_t* px, float shift) {
  const float r = px[0] / 255.0f, g = px[1] / 255.0f, b = px[2] / 255.0f;
  const float maxc = std::fmax(r, std::fmax(g, b));
  const float minc = std::fmin(r, std::fmin(g, b));
  if (maxc == minc) {  // Gray: no hue; x 255 as torchvision writes it.
    px[0] = px[1] = px[2] = static_cast<uint8_t>(maxc * 255.0f);
    return;
  }
  const float cr = maxc - minc;
  const float s = cr / maxc;
  // torchvision's (maxc - x) / cr terms, only the two the branch uses.
  float h = maxc == r   ? (maxc - b) / cr - (maxc - g) / cr
            : maxc == g ? 2.0f + (maxc - r) / cr - (maxc - b) / cr
                        : 4.0f + (maxc - g) / cr - (maxc - r) / cr;
  h = h / 6.0f + 1.0f;  // In [5/6, 11/6): fmod(h, 1) is exactly this.
  h = (h >= 1.0f ? h - 1.0f : h) + shift;
  h -= std::floor(h);
  const float v = maxc;
  const float h6 = h * 6.0f;
  const float i = std::floor(h6);
  const float f = h6 - i;
  auto unit = [](float x) { return x < 0 ? 0.0f : x > 1 ? 1.0f : x; };
  const float p = unit(v * (1.0f - s));
  const float q = unit(v * (1.0f - s * f));
  const float t = unit(v * (1.0f - s * (1.0f - f)));
  float out[3];
  switch (static_cast<int>(i)) {
    case 0: out[0] = v, out[1] = t, out[2] = p; break;
    case 1: out[0] = q, out[1] = v, out[2] = p; break;
    case 2: out[0] = p, out[1] = v, out[2] = t; break;
    case 3: out[0] = p, out[1] = q, out[2] = v; break;
    case 4: out[0] = t, out[1] = p, out[2] = v; break;
    default: out[0] = v, out[1] = p, out[2] = q;
  }
  for (int k = 0; k < 3; ++k) px[k] = static_cast<uint8_t>(out[k] * 255.0f);
}

// A per-value blend (brightness, contrast) as a table: one lookup per value.
void BlendTable(uint8_t* hwc, size_t n, int c, int colour, float other, float ratio) {
  uint8_t table[256];
  for (int v = 0; v < 256; ++v) table[v] = Blend(static_cast<float>(v), other, ratio);
  if (colour == c) {
    for (size_t i = 0; i < n * c; ++i) hwc[i] = table[hwc[i]];
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    for (int ch = 0; ch < colour; ++ch) hwc[i * c + ch] = table[hwc[i * c + ch]];
  }
}

class ColorJitterKind : public PixelOp {
 public:
  v1::Op::OpCase op_case() const override { return v1::Op::kColorJitter; }

  absl::Status Check(v1::Op* op, const std::vector<FieldPlan*>&,
                     OpTraits* traits) const override {
    const v1::ColorJitterOp& j = op->color_jitter();
    if (!j.has_brightness() && !j.has_contrast() && !j.has_saturation() && !j.has_hue())
      return absl::InvalidArgumentError(
          "set at least one of brightness, contrast, saturation, hue");
    const std::pair<bool, absl::Status> checks[] = {
        {j.has_brightness(), CheckRange(j.brightness(), 0, 1e3, "brightness")},
        {j.has_contrast(), CheckRange(j.contrast(), 0, 1e3, "contrast")},
        {j.has_saturation(), CheckRange(j.saturation(), 0, 1e3, "saturation")},
        {j.has_hue(), CheckRange(j.hue(), -0.5, 0.5, "hue")}};
    for (const auto& [set, status] : checks) {
      if (set && !status.ok()) return status;
    }
    traits->random = true;
    return absl::OkStatus();
  }

  // v: the order (4), then the four factors (0 for a range not set).
  void Draw(const v1::Op& op, SampleDraw& d) const override {
    const v1::ColorJitterOp& j = op.color_jitter();
    Effect e{this, &op, {kBrightness, kContrast, kSaturation, kHue}};
    for (int i = 3; i > 0; --i) std::swap(e.v[i], e.v[d.rng.Below(i + 1)]);
    const std::pair<bool, const v1::Range*> ranges[] = {
        {j.has_brightness(), &j.brightness()}, {j.has_contrast(), &j.contrast()},
        {j.has_saturation(), &j.saturation()}, {j.has_hue(), &j.hue()}};
    for (const auto& [set, r] : ranges) {
      e.v.push_back(set ? d.rng.Uniform(r->min(), r->max()) : 0.0);
    }
    d.Add(e);
  }

  void ApplyPixels(const Effect& e, const FieldPlan& f, uint8_t* hwc) const override {
    const size_t n = static_cast<size_t>(f.width) * f.height;
    const int c = f.channels;
    const int colour = c >= 3 ? 3 : 1;  // Alpha is kept.
    const v1::ColorJitterOp& j = e.op->color_jitter();
    const bool set[4] = {j.has_brightness(), j.has_contrast(), j.has_saturation(), j.has_hue()};
    for (int k = 0; k < 4; ++k) {
      const int adjust = static_cast<int>(e.v[k]);
      if (!set[adjust]) continue;
      const float ratio = static_cast<float>(e.v[4 + adjust]);
      switch (adjust) {
        case kBrightness:
          BlendTable(hwc, n, c, colour, 0, ratio);
          break;
        case kContrast: {
          double sum = 0;
          for (size_t i = 0; i < n; ++i) sum += colour == 3 ? Luma(hwc + i * c) : hwc[i * c];
          BlendTable(hwc, n, c, colour, static_cast<float>(sum / static_cast<double>(n)), ratio);
          break;
        }
        case kSaturation:
          if (colour != 3) break;
          for (size_t i = 0; i < n; ++i) {
            const float gray = Luma(hwc + i * c);
            for (int ch = 0; ch < 3; ++ch) hwc[i * c + ch] = Blend(hwc[i * c + ch], gray, ratio);
          }
          break;
        default:
          if (colour != 3 || ratio == 0) break;
          for (size_t i = 0; i < n; ++i) ShiftHue(hwc + i * c, ratio);
      }
    }
  }
};

}  // namespace

STOKER_DEFINE_OP(ColorJitter, ColorJitterKind)

}  // namespace stoker
