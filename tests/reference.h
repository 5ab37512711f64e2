// Straightforward reference implementations for pixel checks: a decode plus
// a direct, floating-point, two-dimensional antialiased-bilinear resample
// (no fixed point, no separable passes, no intermediate rounding), and the
// val transform done literally as "resize the whole image, then crop".
// Slow and simple on purpose. Stateless; thread-safe.
#ifndef STOKER_TESTS_REFERENCE_H_
#define STOKER_TESTS_REFERENCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace stoker::reference {

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // Packed.
};

// Decodes a JPEG file to RGB with libjpeg-turbo's accurate DCT.
absl::StatusOr<Image> DecodeFile(const std::string& path);

// Resamples the region (x, y, w, h) of `src` to out_w x out_h with the
// triangle filter widened by the scale, mirrored if `flip`.
Image ResampleRegion(const Image& src, double x, double y, double w, double h,
                     int out_w, int out_h, bool flip);

// torchvision val: Resize(round(size*256/224)) then CenterCrop(size).
Image ValTransform(const Image& src, int size);

// Largest and mean absolute difference between two same-sized images.
struct Diff {
  int max_abs = 0;
  double mean_abs = 0;
};
Diff Compare(const uint8_t* a, const uint8_t* b, size_t n);

}  // namespace stoker::reference

#endif  // STOKER_TESTS_REFERENCE_H_
