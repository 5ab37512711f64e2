#include "server/imaging/decode.h"

#include <spng.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"

namespace stoker {
namespace {

constexpr uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

// A DecodedRegion for one thread's reuse, its pixels decode scratch.
struct ScratchRegion : DecodedRegion {
  ScratchRegion() { RegisterDecodeScratch(&image.pixels); }
  ~ScratchRegion() { ForgetDecodeScratch(&image.pixels); }
  ScratchRegion(const ScratchRegion&) = delete;
  ScratchRegion& operator=(const ScratchRegion&) = delete;
};

// PIL's ITU-R 601-2 luma ("L" from "RGB"), in its fixed point.
inline uint8_t Luma(const uint8_t* rgb) {
  return static_cast<uint8_t>(
      (rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16);
}

// Packed 8-bit RGB (or RGBA, `in_channels`) to the request's layout.
void ConvertFromRgb(const std::vector<uint8_t>& in, int in_channels,
                    int pixels, const ImageRequest& r, std::vector<uint8_t>* out) {
  out->resize(static_cast<size_t>(pixels) * r.channels * r.elem_bytes);
  for (int i = 0; i < pixels; ++i) {
    const uint8_t* p = &in[static_cast<size_t>(i) * in_channels];
    if (r.channels == 1) {
      const uint8_t v = Luma(p);
      if (r.elem_bytes == 2) {
        const uint16_t w = v;
        std::memcpy(&(*out)[static_cast<size_t>(i) * 2], &w, 2);
      } else {
        (*out)[i] = v;
      }
    } else {
      uint8_t* o = &(*out)[static_cast<size_t>(i) * r.channels];
      o[0] = p[0];
      o[1] = p[1];
      o[2] = p[2];
      if (r.channels == 4) o[3] = in_channels == 4 ? p[3] : 255;
    }
  }
}

struct SpngDeleter {
  void operator()(spng_ctx* c) const { spng_ctx_free(c); }
};

absl::Status PngError(const char* what, int rc) {
  return absl::DataLossError(absl::StrCat("not a complete PNG (", what, ": ",
                                          spng_strerror(rc), ")"));
}

absl::Status DecodePng(const uint8_t* data, size_t size, const ImageRequest& r,
                       const std::function<RegionRequest(int, int)>& plan,
                       Image* out) {
  std::unique_ptr<spng_ctx, SpngDeleter> ctx(spng_ctx_new(0));
  if (!ctx) return absl::ResourceExhaustedError("PNG: out of memory");
  spng_set_chunk_limits(ctx.get(), 1 << 24, 1 << 26);
  spng_set_image_limits(ctx.get(), 1 << 20, 1 << 20);
  int rc = spng_set_png_buffer(ctx.get(), data, size);
  if (rc != 0) return PngError("buffer", rc);
  spng_ihdr ihdr{};
  rc = spng_get_ihdr(ctx.get(), &ihdr);
  if (rc != 0) return PngError("header", rc);
  const int64_t pixels = int64_t{ihdr.width} * ihdr.height;
  if (pixels > r.limits.max_pixels) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "PNG of ", ihdr.width, "x", ihdr.height, " = ", pixels,
        " pixels exceeds the limit of ", r.limits.max_pixels));
  }
  const int w = static_cast<int>(ihdr.width), h = static_cast<int>(ihdr.height);
  const RegionRequest want = plan(w, h);
  // Rows [y0, y1) are kept; rows past y1 are never inflated. (Interlaced
  // images arrive pass by pass: decoded whole.)
  int y0 = 0, y1 = h;
  if (ihdr.interlace_method == 0) PngRowWindow(want, h, &y0, &y1);
  const bool gray = ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE;
  // The formats libspng produces directly; anything else goes through RGB(A).
  int fmt = r.channels == 4 ? SPNG_FMT_RGBA8 : SPNG_FMT_RGB8;
  int direct_bytes = 0;  // Bytes per pixel of a direct 1-channel decode.
  if (r.channels == 1) {
    if (gray && ihdr.bit_depth == 16 && r.elem_bytes == 2) {
      fmt = SPNG_FMT_PNG, direct_bytes = 2;  // Host-endian 16-bit gray.
    } else if (gray && ihdr.bit_depth <= 8) {
      fmt = SPNG_FMT_G8, direct_bytes = 1;
    } else if (r.indices && ihdr.color_type == SPNG_COLOR_TYPE_INDEXED &&
               ihdr.bit_depth == 8) {
      fmt = SPNG_FMT_PNG, direct_bytes = 1;  // The palette indices.
    }
  }
  size_t bytes = 0;
  rc = spng_decoded_image_size(ctx.get(), fmt, &bytes);
  if (rc != 0) return PngError("size", rc);
  if (static_cast<int64_t>(bytes) > r.limits.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "PNG needs ", bytes, " bytes, over the limit of ", r.limits.max_bytes));
  }
  // Its rows, and the converted picture when it is not decoded directly.
  const int64_t converted =
      direct_bytes == r.elem_bytes ? 0 : int64_t{w} * h * r.channels * r.elem_bytes;
  // At most --max-decode-bytes, which the decode budget holds whole.
  if (absl::Status s = ReserveDecode(
          r.limits, std::min(static_cast<int64_t>(bytes) + converted, r.limits.max_bytes),
          &out->reserved);
      !s.ok())
    return s;
  const size_t row_bytes = bytes / h;
  const int flags = fmt == SPNG_FMT_RGBA8 ? SPNG_DECODE_TRNS : 0;
  thread_local ScratchBuffer scratch;
  std::vector<uint8_t>& buf = scratch.bytes;
  buf.resize(row_bytes * (y1 - y0));
  if (y0 == 0 && y1 == h) {
    rc = spng_decode_image(ctx.get(), buf.data(), buf.size(), fmt, flags);
    if (rc != 0) return PngError("data", rc);
  } else {
    rc = spng_decode_image(ctx.get(), nullptr, 0, fmt, flags | SPNG_DECODE_PROGRESSIVE);
    if (rc != 0) return PngError("data", rc);
    thread_local ScratchBuffer skip_scratch;
    std::vector<uint8_t>& skip = skip_scratch.bytes;
    skip.resize(row_bytes);
    for (int y = 0; y < y1; ++y) {
      rc = spng_decode_row(ctx.get(), y < y0 ? skip.data() : &buf[(y - y0) * row_bytes],
                           row_bytes);
      if (rc != 0 && !(rc == SPNG_EOI && y == h - 1)) return PngError("data", rc);
    }
  }
  const int64_t kept = int64_t{w} * (y1 - y0);
  out->width = out->scaled_width = w;
  out->height = y1 - y0;
  out->scaled_height = h;
  out->x = 0;
  out->y = y0;
  out->align = 1;
  out->region_dependent = false;
  out->channels = r.channels;
  out->elem_bytes = r.elem_bytes;
  if (direct_bytes == r.elem_bytes) {
    out->pixels.swap(buf);  // Both stay reusable per-thread buffers.
  } else if (direct_bytes == 1) {  // 8-bit gray widened to 16.
    out->pixels.resize(static_cast<size_t>(kept) * 2);
    for (int64_t i = 0; i < kept; ++i) {
      const uint16_t v = buf[i];
      std::memcpy(&out->pixels[i * 2], &v, 2);
    }
  } else {
    ConvertFromRgb(buf, fmt == SPNG_FMT_RGBA8 ? 4 : 3, static_cast<int>(kept), r,
                   &out->pixels);
  }
  return absl::OkStatus();
}

}  // namespace

void PngRowWindow(const RegionRequest& want, int h, int* y0, int* y1) {
  *y0 = 0;
  *y1 = h;
  if (!want.crop) return;
  // The plan is in DCT-scaled coordinates (a PNG is never scaled).
  const int e = std::clamp(want.eighths, 1, 8);
  *y0 = std::clamp(want.need.y0 * 8 / e, 0, h);
  *y1 = std::clamp((want.need.y1 * 8 + e - 1) / e, *y0, h);
}

bool PngRowsAlone(const uint8_t* data, size_t size) {
  // Signature (8), IHDR length and type (8), then width, height, depth,
  // color type, compression, filter (12): the interlace method.
  return SniffImageFormat(data, size) == ImageFormat::kPng && size > 28 && data[28] == 0;
}

ImageFormat SniffImageFormat(const uint8_t* data, size_t size) {
  if (size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff) {
    return ImageFormat::kJpeg;
  }
  if (size >= 8 && std::memcmp(data, kPngSignature, 8) == 0) {
    return ImageFormat::kPng;
  }
  return ImageFormat::kUnknown;
}

void DoneWith(Image* image) { image->reserved.reset(); }

absl::Status DecodeImage(
    const uint8_t* data, size_t size, const ImageRequest& request,
    const std::function<RegionRequest(int width, int height)>& plan,
    Image* out) {
  if (size == 0) return absl::InvalidArgumentError("empty image data");
  if (request.channels != 1 && request.channels != 3 && request.channels != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("images have 1, 3 or 4 channels, not ", request.channels));
  }
  switch (SniffImageFormat(data, size)) {
    case ImageFormat::kPng:
    {
      absl::Status s = DecodePng(data, size, request, plan, out);
      if (!s.ok()) DoneWith(out);
      return s;
    }
    case ImageFormat::kJpeg: {
      thread_local ScratchRegion region;
      JpegDecoder& decoder = ThreadLocalDecoder();
      decoder.set_limits(request.limits);
      absl::Status s = decoder.Decode(data, size, plan, &region);
      out->reserved = std::move(region.reserved);
      if (!s.ok()) {
        DoneWith(out);
        return s;
      }
      out->width = region.image.width;
      out->height = region.image.height;
      out->x = region.x;
      out->y = region.y;
      out->scaled_width = region.scaled_width;
      out->scaled_height = region.scaled_height;
      out->align = region.align;
      out->region_dependent = region.region_dependent;
      out->channels = request.channels;
      out->elem_bytes = request.elem_bytes;
      if (request.channels == 3 && request.elem_bytes == 1) {
        out->pixels.swap(region.image.pixels);  // Both stay reusable buffers.
      } else {
        ConvertFromRgb(region.image.pixels, 3, out->width * out->height,
                       request, &out->pixels);
      }
      return absl::OkStatus();
    }
    case ImageFormat::kUnknown:
      break;
  }
  return absl::DataLossError(absl::StrCat(
      "neither a JPEG nor a PNG (", size, " bytes starting ",
      absl::StrCat(absl::Hex(data[0], absl::kZeroPad2),
                   size > 1 ? absl::StrCat(" ", absl::Hex(data[1], absl::kZeroPad2)) : ""),
      ")"));
}

absl::Status DecodeForCrop(
    JpegDecoder& decoder, const uint8_t* data, size_t size,
    const std::function<CropBox(int width, int height)>& box_for, int out_size,
    bool scale, bool crop, DecodedRegion* region, CropBox* box) {
  absl::Status s = decoder.Decode(data, size, [&](int width, int height) {
    const DecodePlan plan =
        PlanDecode(width, height, box_for(width, height), out_size, scale, crop);
    *box = plan.box;
    return RegionRequest{plan.eighths, plan.need, crop};
  }, region);
  if (!s.ok()) region->reserved.reset();
  box->x -= region->x;  // Into the decoded region's coordinates.
  box->y -= region->y;
  return s;
}

}  // namespace stoker
