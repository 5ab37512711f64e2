// Image decoding by content: the first bytes, never the file name, pick the
// decoder (JPEG: libjpeg-turbo through jpeg.h, with its scale and region
// levers; PNG: libspng, always whole). Anything else is DATA_LOSS naming
// what the bytes look like, so a PNG named .jpg decodes and a text file
// named .png is a per-sample error.
//
// Output is packed 8-bit with 1 (gray), 3 (RGB) or 4 (RGBA) channels, or
// 16-bit with 1 channel (for masks of 16-bit PNGs, host-endian). Gray from
// color uses PIL's convert("L") weights; RGBA from a source without alpha
// has alpha 255 (PNG tRNS applied, as PIL's convert("RGBA")). With
// `indices`, a palette PNG read as 1 channel keeps its palette indices (a
// segmentation mask's class ids, as PIL's mode "P" array).
//
// Bounded by DecodeLimits: the source's pixel count is checked from the
// header before any pixel buffer is allocated; PNG ancillary chunks are
// capped. Thread-safe: the JPEG decoder is per thread, PNG contexts per call.
#ifndef STOKER_SERVER_IMAGING_DECODE_H_
#define STOKER_SERVER_IMAGING_DECODE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "server/imaging/jpeg.h"
#include "server/imaging/transform.h"

namespace stoker {

enum class ImageFormat { kUnknown, kJpeg, kPng };

// From the signature bytes.
ImageFormat SniffImageFormat(const uint8_t* data, size_t size);

// Read-only pixels of a decoded picture (an Image's, or a cached one's),
// with the same geometry fields as Image.
struct ImageView {
  const uint8_t* pixels = nullptr;
  int width = 0, height = 0, channels = 0, elem_bytes = 1;
  int x = 0, y = 0, scaled_width = 0, scaled_height = 0;
};

// A decoded (part of a possibly DCT-scaled) image.
struct Image {
  int width = 0, height = 0;  // Of `pixels`.
  int channels = 0;
  int elem_bytes = 1;
  int x = 0, y = 0;           // Where pixels' (0, 0) lies in the scaled image.
  int scaled_width = 0, scaled_height = 0;  // The whole (scaled) image.
  int align = 1;  // A JPEG's iMCU column width (DecodedRegion's); else 1.
  bool region_dependent = false;  // A JPEG's (DecodedRegion's).
  std::vector<uint8_t> pixels;  // Packed, row-major.
  // What the decode reserved (DecodeLimits::reserve; null: nothing), held
  // until DoneWith.
  std::shared_ptr<void> reserved;
  ImageView view() const {
    return {pixels.data(), width, height, channels, elem_bytes,
            x, y, scaled_width, scaled_height};
  }
};

struct ImageRequest {
  int channels = 3;    // 1, 3 or 4.
  int elem_bytes = 1;  // 2: 16-bit gray (PNG), or 8-bit values widened.
  bool indices = false;
  DecodeLimits limits;
};

// The rows [*y0, *y1) of an h-row non-interlaced PNG that a decode for
// `want` keeps (a PNG is never scaled; `want` is in DCT-scaled
// coordinates): all rows unless want.crop.
void PngRowWindow(const RegionRequest& want, int h, int* y0, int* y1);

// Whether `data` is a PNG whose rows decode alone (not interlaced).
bool PngRowsAlone(const uint8_t* data, size_t size);

// Decodes `data`. `plan(width, height)` is called once with the source size
// before pixels are decoded; a JPEG honours its scale and region, a PNG its
// rows (never scaled: its Image has scaled = source size and x = 0; rows
// past the region are not inflated).
// DATA_LOSS for unknown, truncated or corrupt data (the message names the
// format), RESOURCE_EXHAUSTED over a limit.
absl::Status DecodeImage(
    const uint8_t* data, size_t size, const ImageRequest& request,
    const std::function<RegionRequest(int width, int height)>& plan,
    Image* out);

// Once `image`'s picture is used: gives back what its decode reserved.
// DecodeImage calls it on error.
void DoneWith(Image* image);

// An Image for one thread's reuse (a thread_local), its pixels decode
// scratch (server/imaging/jpeg.h): kept for the thread's next picture,
// freed when over kKeptDecodeBytes and no longer needed that large.
struct ScratchImage : Image {
  ScratchImage() { RegisterDecodeScratch(&pixels); }
  ~ScratchImage() { ForgetDecodeScratch(&pixels); }
  ScratchImage(const ScratchImage&) = delete;
  ScratchImage& operator=(const ScratchImage&) = delete;
};

// Decodes what an out_size x out_size crop needs: one header read, then
// `box_for(width, height)` chooses the crop, PlanDecode the scale and
// region. On success *box is the crop in `region`'s pixel coordinates,
// ready for ResizeBox. Errors are the decoder's.
absl::Status DecodeForCrop(JpegDecoder& decoder, const uint8_t* data,
                           size_t size,
                           const std::function<CropBox(int width, int height)>& box_for,
                           int out_size, bool scale, bool crop,
                           DecodedRegion* region, CropBox* box);

}  // namespace stoker

#endif  // STOKER_SERVER_IMAGING_DECODE_H_
