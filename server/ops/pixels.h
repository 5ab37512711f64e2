// Pixel arithmetic the per-pixel ops share, as torchvision does it on uint8
// tensors: float32 math, clamped to 0..255, truncated (`.to(torch.uint8)`).
#ifndef STOKER_SERVER_OPS_PIXELS_H_
#define STOKER_SERVER_OPS_PIXELS_H_

#include <cstdint>

namespace stoker {

// ratio * a + (1 - ratio) * b, clamped and truncated (torchvision's _blend).
inline uint8_t Blend(float a, float b, float ratio) {
  const float v = ratio * a + (1.0f - ratio) * b;
  return static_cast<uint8_t>(v < 0 ? 0.0f : v > 255 ? 255.0f : v);
}

// rgb_to_grayscale of one pixel: 0.2989 r + 0.587 g + 0.114 b, truncated.
inline uint8_t Luma(const uint8_t* rgb) {
  return static_cast<uint8_t>(0.2989f * rgb[0] + 0.587f * rgb[1] + 0.114f * rgb[2]);
}

}  // namespace stoker

#endif  // STOKER_SERVER_OPS_PIXELS_H_
