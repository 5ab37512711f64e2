// Geometry and resampling for the `val` and `train` transforms.
//
// A transform is reduced to a CropBox in source pixel coordinates (plus a
// flip), and one resampler maps that box to the S x S output. The box
// functions reproduce torchvision's geometry: Resize(round(S*256/224)) +
// CenterCrop(S) for val, RandomResizedCrop(S, (0.08, 1), (3/4, 4/3)) +
// RandomHorizontalFlip(0.5) for train, including its fallback after 10
// tries. The resampler uses PIL's antialiased bilinear filter (triangle
// kernel widened by the downscale factor, PIL's window bounds and 22-bit
// fixed-point weights), but runs the vertical pass first and keeps the
// intermediate unrounded (PIL goes horizontal first through an 8-bit
// intermediate): far fewer rows to filter horizontally when shrinking, and
// pixels within one level of torchvision-on-PIL. Stateless functions; the scratch
// buffers belong to the calling thread.
#ifndef STOKER_SERVER_IMAGING_TRANSFORM_H_
#define STOKER_SERVER_IMAGING_TRANSFORM_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "server/imaging/elements.h"
#include "server/imaging/jpeg.h"
#include "util/rng.h"

namespace stoker {

struct CropBox {
  double x = 0, y = 0, w = 0, h = 0;  // Source region, may be fractional.
  bool flip = false;                  // Mirror the output horizontally.
};

// Val: the region of the source that Resize(round(size*256/224)) followed by
// CenterCrop(size) keeps.
CropBox CenterCropBox(int src_w, int src_h, int size);

// Train: RandomResizedCrop's box and the flip, drawn from `rng` in
// torchvision's order (scale, log-ratio, [repeat], top, left, then flip).
CropBox RandomResizedCropBox(int src_w, int src_h, Rng& rng);

// RandomResizedCrop's box alone (no flip drawn), for area `scale` and
// aspect `ratio` ranges.
CropBox RandomResizedCropWindow(int src_w, int src_h, double scale_min,
                                double scale_max, double ratio_min,
                                double ratio_max, Rng& rng);

// What to decode for one sample: the DCT scale, the region of the scaled
// image the resampler reads (the box plus the filter's reach), and the box
// in scaled coordinates.
struct DecodePlan {
  int eighths = 8;
  PixelRect need;
  CropBox box;
};

// With `scale`, the smallest of 1/8, 1/4, 1/2 (the scales libjpeg-turbo
// has SIMD IDCTs for) that keeps the box at least out_size x out_size;
// 8/8 otherwise. The region is the whole image
// unless `crop`.
DecodePlan PlanDecode(int width, int height, const CropBox& box, int out_size,
                      bool scale, bool crop);
// The same for an out_w x out_h output and a filter that reaches `reach`
// (1 bilinear, 2 bicubic) source pixels per output pixel.
DecodePlan PlanDecode(int width, int height, const CropBox& box, int out_w,
                      int out_h, bool scale, bool crop, int reach);

// Per-channel affine map: out = x * scale + offset. For images, from
// torchvision's Normalize(mean, std) on x/255: scale = 1/(255 std),
// offset = -mean/std; for arrays scale = 1/std.
struct Normalization {
  float scale[4] = {1, 1, 1, 1};
  float offset[4] = {0, 0, 0, 0};
};

// Writes `pixels` x `channels` interleaved values (uint8_t or float) as
// x * scale[c] + offset[c] into `dst` of float type `to` (rounded into it
// by server/imaging/elements.h's rule); channel planes first when `chw`.
template <typename T>
void WriteNormalized(const T* src, size_t pixels, int channels,
                     const Normalization& n, bool chw, ElemType to, void* dst);

// Resamples `box` of the packed RGB `src` into `dst` (out_w x out_h x 3,
// packed). The box must lie inside the image.
void ResizeBox(const uint8_t* src, int src_w, int src_h, const CropBox& box,
               int out_w, int out_h, uint8_t* dst);

enum class Filter { kBilinear, kBicubic, kNearest };

// Resamples `box` of a packed image of `channels` x `elem_bytes`-byte
// samples into `dst` (out_w x out_h, packed, mirrored when box.flip).
// Bilinear and bicubic (uint8 only) are PIL's antialiased filters; 3-channel
// bilinear is ResizeBox. Nearest (any element size) takes the source pixel
// under each output pixel's center, as PIL's NEAREST. A box of whole pixels
// the output's size (a plain crop) is copied: every filter is the identity
// there.
void Resample(const uint8_t* src, int src_w, int src_h, int channels,
              int elem_bytes, const CropBox& box, int out_w, int out_h,
              Filter filter, uint8_t* dst);

}  // namespace stoker

#endif  // STOKER_SERVER_IMAGING_TRANSFORM_H_
