#include "server/imaging/transform.h"

#include <emmintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace stoker {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

// Per-output-index filter taps along one axis.
struct AxisCoeffs {
  int ksize = 0;
  std::vector<int> first;     // First source index of each output's window.
  std::vector<int> count;     // Taps used by each output.
  std::vector<int32_t> taps;  // ksize per output, fixed point.
};

double BilinearFilter(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// PIL's bicubic (a = -0.5).
double BicubicFilter(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

void ComputeAxis(int in_size, double box0, double box_len, int out_size,
                 AxisCoeffs* c, bool bicubic = false) {
  const double scale = box_len / out_size;
  const double filterscale = std::max(scale, 1.0);
  // Bilinear support is 1, bicubic 2.
  const double support = (bicubic ? 2.0 : 1.0) * filterscale;
  c->ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c->first.resize(out_size);
  c->count.resize(out_size);
  c->taps.assign(static_cast<size_t>(out_size) * c->ksize, 0);
  std::vector<double> w(c->ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = box0 + (xx + 0.5) * scale;
    const double inv = 1.0 / filterscale;
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double total = 0;
    for (int x = 0; x < xmax; ++x) {
      const double t = (x + xmin - center + 0.5) * inv;
      w[x] = bicubic ? BicubicFilter(t) : BilinearFilter(t);
      total += w[x];
    }
    int32_t* out = &c->taps[static_cast<size_t>(xx) * c->ksize];
    for (int x = 0; x < xmax; ++x) {
      double k = total != 0 ? w[x] / total : 0;
      out[x] = static_cast<int32_t>(k < 0 ? -0.5 + k * (1 << kPrecisionBits)
                                          : 0.5 + k * (1 << kPrecisionBits));
    }
    c->first[xx] = xmin;
    c->count[xx] = xmax;
  }
}


}  // namespace

CropBox CenterCropBox(int src_w, int src_h, int size) {
  // torchvision Resize(int): the shorter side becomes `resize`, the longer
  // int(resize * long / short) (truncated, as torchvision does).
  const int resize = static_cast<int>(std::lround(size * 256.0 / 224.0));
  int rw, rh;
  if (src_w <= src_h) {
    rw = resize;
    rh = static_cast<int>(static_cast<int64_t>(resize) * src_h / src_w);
  } else {
    rh = resize;
    rw = static_cast<int>(static_cast<int64_t>(resize) * src_w / src_h);
  }
  // CenterCrop: offsets rounded half to even, as Python's round().
  const double top = std::nearbyint((rh - size) / 2.0);
  const double left = std::nearbyint((rw - size) / 2.0);
  const double sx = static_cast<double>(src_w) / rw;
  const double sy = static_cast<double>(src_h) / rh;
  CropBox b;
  b.x = left * sx;
  b.y = top * sy;
  b.w = size * sx;
  b.h = size * sy;
  return b;
}

CropBox RandomResizedCropBox(int src_w, int src_h, Rng& rng) {
  CropBox b = RandomResizedCropWindow(src_w, src_h, 0.08, 1.0, 3.0 / 4.0,
                                      4.0 / 3.0, rng);
  b.flip = rng.Uniform01() < 0.5;
  return b;
}

CropBox RandomResizedCropWindow(int src_w, int src_h, double scale_min,
                                double scale_max, double ratio_min,
                                double ratio_max, Rng& rng) {
  const double area = static_cast<double>(src_w) * src_h;
  const double log_lo = std::log(ratio_min), log_hi = std::log(ratio_max);
  CropBox b;
  bool found = false;
  for (int attempt = 0; attempt < 10 && !found; ++attempt) {
    const double target_area = area * rng.Uniform(scale_min, scale_max);
    const double aspect = std::exp(rng.Uniform(log_lo, log_hi));
    const int w = static_cast<int>(std::nearbyint(std::sqrt(target_area * aspect)));
    const int h = static_cast<int>(std::nearbyint(std::sqrt(target_area / aspect)));
    if (w > 0 && w <= src_w && h > 0 && h <= src_h) {
      b.y = static_cast<double>(rng.Below(src_h - h + 1));
      b.x = static_cast<double>(rng.Below(src_w - w + 1));
      b.w = w;
      b.h = h;
      found = true;
    }
  }
  if (!found) {  // Fallback: central crop clamped to the ratio range.
    const double in_ratio = static_cast<double>(src_w) / src_h;
    int w = src_w, h = src_h;
    if (in_ratio < ratio_min) {
      h = static_cast<int>(std::nearbyint(w / ratio_min));
    } else if (in_ratio > ratio_max) {
      w = static_cast<int>(std::nearbyint(h * ratio_max));
    }
    b.x = (src_w - w) / 2;
    b.y = (src_h - h) / 2;
    b.w = w;
    b.h = h;
  }
  return b;
}

template <typename T>
void WriteNormalized(const T* src, size_t pixels, int channels, const Normalization& n,
                     bool chw, ElemType to, void* dst) {
  if (to == ElemType::kFloat32) {  // Straight into the field.
    for (int c = 0; c < channels; ++c) {
      const float scale = n.scale[c], offset = n.offset[c];
      // Channel c's outputs: a plane (chw) or every channels-th value.
      float* out = static_cast<float*>(dst) + (chw ? c * pixels : c);
      const size_t step = chw ? 1 : channels;
      for (size_t i = 0; i < pixels; ++i) out[i * step] = src[i * channels + c] * scale + offset;
    }
    return;
  }
  // A 16-bit float field: float32 values in blocks of the output's order,
  // each converted as it is made (no buffer the size of the picture).
  constexpr size_t kBlock = 1024;
  float block[kBlock];
  uint8_t* out = static_cast<uint8_t*>(dst);
  const size_t bytes = ElemBytes(to);
  if (chw) {  // Plane by plane: output i of plane c is pixel i's channel c.
    for (int c = 0; c < channels; ++c) {
      const float scale = n.scale[c], offset = n.offset[c];
      for (size_t first = 0; first < pixels; first += kBlock) {
        const size_t m = std::min(kBlock, pixels - first);
        for (size_t j = 0; j < m; ++j) block[j] = src[(first + j) * channels + c] * scale + offset;
        StoreFloats(block, m, to, out + (c * pixels + first) * bytes);
      }
    }
    return;
  }
  // Interleaved: the output's order is the input's.
  const size_t total = pixels * channels;
  int c = 0;
  for (size_t first = 0; first < total; first += kBlock) {
    const size_t m = std::min(kBlock, total - first);
    for (size_t j = 0; j < m; ++j) {
      block[j] = src[first + j] * n.scale[c] + n.offset[c];
      c = c + 1 == channels ? 0 : c + 1;
    }
    StoreFloats(block, m, to, out + first * bytes);
  }
}
template void WriteNormalized<uint8_t>(const uint8_t*, size_t, int, const Normalization&, bool,
                                       ElemType, void*);
template void WriteNormalized<float>(const float*, size_t, int, const Normalization&, bool,
                                     ElemType, void*);

DecodePlan PlanDecode(int width, int height, const CropBox& box, int out_size,
                      bool scale, bool crop) {
  return PlanDecode(width, height, box, out_size, out_size, scale, crop, 1);
}

DecodePlan PlanDecode(int width, int height, const CropBox& box, int out_w,
                      int out_h, bool scale, bool crop, int reach) {
  DecodePlan p;
  if (scale) {
    // Only the scales with SIMD IDCTs in libjpeg-turbo (1/8, 1/4, 1/2):
    // the others run plain C and cost more than they save (measured by
    // bench/decode_bench).
    for (int m : {1, 2, 4}) {
      if (box.w * m / 8 >= out_w && box.h * m / 8 >= out_h) {
        p.eighths = m;
        break;
      }
    }
  }
  const int sw = ScaledSize(width, p.eighths), sh = ScaledSize(height, p.eighths);
  const double fx = static_cast<double>(sw) / width;
  const double fy = static_cast<double>(sh) / height;
  p.box = CropBox{box.x * fx, box.y * fy, box.w * fx, box.h * fy, box.flip};
  if (!crop) {
    p.need = PixelRect{0, 0, sw, sh};
    return p;
  }
  // The resampler reads up to its support (scale, at least 1) plus half a
  // pixel beyond the box; one more pixel of margin covers rounding.
  const double mx = reach * std::max(1.0, p.box.w / out_w) + 1.5;
  const double my = reach * std::max(1.0, p.box.h / out_h) + 1.5;
  p.need.x0 = std::max(0, static_cast<int>(std::floor(p.box.x - mx)));
  p.need.y0 = std::max(0, static_cast<int>(std::floor(p.box.y - my)));
  p.need.x1 = std::min(sw, static_cast<int>(std::ceil(p.box.x + p.box.w + mx)));
  p.need.y1 = std::min(sh, static_cast<int>(std::ceil(p.box.y + p.box.h + my)));
  return p;
}

// Compiled twice; the loader picks the AVX2 build on CPUs that have it
// (8-wide integer multiplies for the vertical pass) and the SSE2 one
// elsewhere.
__attribute__((target_clones("avx2", "default")))
void ResizeBox(const uint8_t* src, int src_w, int src_h, const CropBox& box,
               int out_w, int out_h, uint8_t* dst) {
  thread_local AxisCoeffs cx, cy;
  thread_local std::vector<int32_t> acc;
  thread_local std::vector<float> frow, kf;
  ComputeAxis(src_w, box.x, box.w, out_w, &cx);
  ComputeAxis(src_h, box.y, box.h, out_h, &cy);
  // Only the source columns some output reads.
  const int col_lo = cx.first[0];
  const int col_hi = cx.first[out_w - 1] + cx.count[out_w - 1];
  const size_t span = static_cast<size_t>(col_hi - col_lo) * 3;
  acc.resize(span + 1);  // The last pixel's 4-lane load reads one past.
  acc[span] = 0;
  frow.resize(static_cast<size_t>(col_hi - col_lo) * 4 + 4);
  kf.resize(cx.taps.size());
  constexpr float kUnit = 1.0f / (1 << kPrecisionBits);
  for (size_t i = 0; i < kf.size(); ++i) kf[i] = static_cast<float>(cx.taps[i]) * kUnit;
  const __m128 half = _mm_set1_ps(0.5f);
  const __m128 unit = _mm_set1_ps(kUnit);
  // Plain locals: the byte stores below may alias anything, so fields read
  // through references and vectors would be reloaded for every pixel.
  const bool flip = box.flip;
  const int ksize_x = cx.ksize, ksize_y = cy.ksize, cols = col_hi - col_lo;
  const int* const first_x = cx.first.data();
  const int* const count_x = cx.count.data();
  const int* const first_y = cy.first.data();
  const int* const count_y = cy.count.data();
  const int32_t* const taps_y = cy.taps.data();
  const float* const kfx = kf.data();
  int32_t* const a = acc.data();
  float* const fr = frow.data();
  for (int y = 0; y < out_h; ++y) {
    // Vertical pass first (it shrinks the rows the horizontal pass sees):
    // exact integer sums over contiguous bytes, so it vectorizes.
    // The first tap sets the sums, the others add to them.
    const int32_t* k = taps_y + static_cast<size_t>(y) * ksize_y;
    if (count_y[y] == 0) std::fill(a, a + span, 0);
    for (int t = 0; t < count_y[y]; ++t) {
      const uint8_t* p =
          src + (static_cast<size_t>(first_y[y] + t) * src_w + col_lo) * 3;
      const int32_t kt = k[t];
      if (t == 0) {
        for (size_t j = 0; j < span; ++j) a[j] = p[j] * kt;
      } else {
        for (size_t j = 0; j < span; ++j) a[j] += p[j] * kt;
      }
    }
    // Unrounded, as 4-lane floats (RGB + the next pixel's R, which the
    // horizontal pass carries along and never stores).
    for (int x = 0; x < cols; ++x) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + x * 3));
      _mm_storeu_ps(fr + static_cast<size_t>(x) * 4, _mm_mul_ps(_mm_cvtepi32_ps(v), unit));
    }
    uint8_t* o = dst + static_cast<size_t>(y) * out_w * 3;
    for (int x = 0; x < out_w; ++x) {
      const float* kx = kfx + static_cast<size_t>(x) * ksize_x;
      const float* p = fr + static_cast<size_t>(first_x[x] - col_lo) * 4;
      __m128 sum = half;
      const int n = count_x[x];
      for (int t = 0; t < n; ++t) {
        sum = _mm_add_ps(sum, _mm_mul_ps(_mm_loadu_ps(p + t * 4), _mm_set1_ps(kx[t])));
      }
      __m128i v = _mm_cvttps_epi32(sum);  // Truncating x + 0.5: rounding.
      v = _mm_packs_epi32(v, v);
      v = _mm_packus_epi16(v, v);
      const uint32_t px = static_cast<uint32_t>(_mm_cvtsi128_si32(v));
      std::memcpy(o + (flip ? out_w - 1 - x : x) * 3, &px, 3);
    }
  }
}

// Any channel count, bilinear or bicubic: PIL's separable filter with its
// fixed-point taps, vertical pass first into unrounded floats, then
// horizontal, rounded and clamped (bicubic overshoots).
void ResampleGeneric(const uint8_t* src, int src_w, int src_h, int channels,
                     const CropBox& box, int out_w, int out_h, bool bicubic,
                     uint8_t* dst) {
  thread_local AxisCoeffs cx, cy;
  thread_local std::vector<float> row;
  ComputeAxis(src_w, box.x, box.w, out_w, &cx, bicubic);
  ComputeAxis(src_h, box.y, box.h, out_h, &cy, bicubic);
  constexpr float kUnit = 1.0f / (1 << kPrecisionBits);
  const size_t stride = static_cast<size_t>(src_w) * channels;
  row.resize(stride);
  for (int y = 0; y < out_h; ++y) {
    std::fill(row.begin(), row.end(), 0.0f);
    const int32_t* k = &cy.taps[static_cast<size_t>(y) * cy.ksize];
    for (int t = 0; t < cy.count[y]; ++t) {
      const uint8_t* p = src + static_cast<size_t>(cy.first[y] + t) * stride;
      const float kt = static_cast<float>(k[t]) * kUnit;
      for (size_t j = 0; j < stride; ++j) row[j] += p[j] * kt;
    }
    uint8_t* o = dst + static_cast<size_t>(y) * out_w * channels;
    for (int x = 0; x < out_w; ++x) {
      const int32_t* kx = &cx.taps[static_cast<size_t>(x) * cx.ksize];
      uint8_t* px = o + static_cast<size_t>(box.flip ? out_w - 1 - x : x) * channels;
      for (int c = 0; c < channels; ++c) {
        float sum = 0.5f;
        for (int t = 0; t < cx.count[x]; ++t) {
          sum += row[static_cast<size_t>(cx.first[x] + t) * channels + c] *
                 (static_cast<float>(kx[t]) * kUnit);
        }
        px[c] = static_cast<uint8_t>(std::clamp(static_cast<int>(std::floor(sum)), 0, 255));
      }
    }
  }
}

// A box of whole pixels the output's size: every filter is the identity
// there (the taps are 1 and 0), so rows are copied (mirrored when flipped).
bool CopyCrop(const uint8_t* src, int src_w, int pixel_bytes, const CropBox& box,
              int out_w, int out_h, uint8_t* dst) {
  if (box.w != out_w || box.h != out_h || box.x != std::floor(box.x) ||
      box.y != std::floor(box.y)) {
    return false;
  }
  const size_t x0 = static_cast<size_t>(box.x), y0 = static_cast<size_t>(box.y);
  const size_t row = static_cast<size_t>(out_w) * pixel_bytes;
  for (int y = 0; y < out_h; ++y) {
    const uint8_t* s = src + ((y0 + y) * src_w + x0) * pixel_bytes;
    uint8_t* o = dst + y * row;
    if (!box.flip) {
      std::memcpy(o, s, row);
    } else if (pixel_bytes == 1) {
      for (int x = 0; x < out_w; ++x) o[x] = s[out_w - 1 - x];
    } else if (pixel_bytes == 3) {  // RGB: no call per pixel.
      for (int x = 0; x < out_w; ++x) {
        const uint8_t* p = s + static_cast<size_t>(out_w - 1 - x) * 3;
        o[x * 3] = p[0];
        o[x * 3 + 1] = p[1];
        o[x * 3 + 2] = p[2];
      }
    } else {
      for (int x = 0; x < out_w; ++x) {
        std::memcpy(o + static_cast<size_t>(x) * pixel_bytes,
                    s + static_cast<size_t>(out_w - 1 - x) * pixel_bytes, pixel_bytes);
      }
    }
  }
  return true;
}

void ResampleNearest(const uint8_t* src, int src_w, int src_h, int pixel_bytes,
                     const CropBox& box, int out_w, int out_h, uint8_t* dst) {
  thread_local std::vector<int> xs;
  xs.resize(out_w);
  for (int x = 0; x < out_w; ++x) {
    const int sx = static_cast<int>(box.x + (x + 0.5) * box.w / out_w);
    xs[box.flip ? out_w - 1 - x : x] = std::clamp(sx, 0, src_w - 1);
  }
  for (int y = 0; y < out_h; ++y) {
    const int sy = std::clamp(static_cast<int>(box.y + (y + 0.5) * box.h / out_h),
                              0, src_h - 1);
    const uint8_t* r = src + static_cast<size_t>(sy) * src_w * pixel_bytes;
    uint8_t* o = dst + static_cast<size_t>(y) * out_w * pixel_bytes;
    if (pixel_bytes == 1) {  // Masks: no call per pixel.
      for (int x = 0; x < out_w; ++x) o[x] = r[xs[x]];
      continue;
    }
    for (int x = 0; x < out_w; ++x) {
      std::memcpy(o + static_cast<size_t>(x) * pixel_bytes,
                  r + static_cast<size_t>(xs[x]) * pixel_bytes, pixel_bytes);
    }
  }
}

void Resample(const uint8_t* src, int src_w, int src_h, int channels,
              int elem_bytes, const CropBox& box, int out_w, int out_h,
              Filter filter, uint8_t* dst) {
  if (CopyCrop(src, src_w, channels * elem_bytes, box, out_w, out_h, dst)) return;
  if (filter == Filter::kNearest || elem_bytes != 1) {
    ResampleNearest(src, src_w, src_h, channels * elem_bytes, box, out_w,
                    out_h, dst);
  } else if (channels == 3 && filter == Filter::kBilinear) {
    ResizeBox(src, src_w, src_h, box, out_w, out_h, dst);
  } else {
    ResampleGeneric(src, src_w, src_h, channels, box, out_w, out_h,
                    filter == Filter::kBicubic, dst);
  }
}

}  // namespace stoker
