// JPEG decoding with libjpeg-turbo's libjpeg API, errors as absl::Status.
//
// Decodes less when asked: at a DCT scale of M/8 (the IDCT then produces
// the smaller image directly), and only the rows and columns of a region
// (jpeg_crop_scanline for columns, jpeg_skip_scanlines for the rows above,
// and stopping after the last row needed). Output is packed RGB; grayscale
// sources come out as RGB and CMYK/YCCK ones (Adobe inverted or not) are
// converted to RGB. Anything libjpeg warns about in the data that is read
// (truncation, corrupt entropy data) is an error, except extraneous bytes
// between markers, which is harmless and common in the wild.
//
// Stateless: every image is decoded by a fresh libjpeg decompressor, so no
// table (quantization, Huffman) of one image can stand in for a table
// another image lacks; output depends only on the input bytes.
//
// Bounded: the limits below are checked from the header, before libjpeg
// allocates anything for the image, and while scans are read.
//
// A JpegDecoder is not thread-safe; each decode thread keeps its own
// (ThreadLocalDecoder()).
#ifndef STOKER_SERVER_IMAGING_JPEG_H_
#define STOKER_SERVER_IMAGING_JPEG_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace stoker {

struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // width * height * 3, row-major.
};

// Pixels [x0, x1) x [y0, y1) of an image.
struct PixelRect {
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

// What to decode of an image: scale eighths/8, and (if crop) only `need`.
struct RegionRequest {
  int eighths = 8;
  PixelRect need;
  bool crop = false;
};

// A decoded part of a (possibly scaled) image.
struct DecodedRegion {
  RgbImage image;
  int x = 0, y = 0;  // Where image's (0, 0) lies in the scaled image.
  int scaled_width = 0, scaled_height = 0;  // The whole scaled image.
  // The width of the scaled image's iMCU columns: a region's columns start
  // at a multiple of it (RegionWindow).
  int align = 1;
  // A progressive file that left coefficients unsent: libjpeg's block
  // smoothing then makes a region's pixels differ from the whole decode's
  // well inside the region (its first block columns), so a whole decode
  // stands only for itself.
  bool region_dependent = false;
  // What DecodeLimits::reserve gave for this decode (null: nothing).
  std::shared_ptr<void> reserved;
};

// The part of a w x h scaled image, whose iMCU columns are `align` wide,
// that a decode for `req` gives: `req.need` clamped to the image, whole
// rows unless req.crop (and the whole image for an empty region), its
// left edge moved down to a multiple of `align` unless it spans every
// column. Decode gives exactly this window; a picture kept whole at the
// same scale gives the same pixels through it.
PixelRect RegionWindow(const RegionRequest& req, int w, int h, int align);

// A decode needing more than this (its output, and a progressive JPEG's
// coefficients) is charged through DecodeLimits::reserve before it
// allocates. A thread's reused decode buffers (decode scratch, below) stay
// larger than this only while the thread decodes such pictures one after
// another: they are freed when it decodes a smaller one (ReserveDecode) or
// runs out of work (TrimDecodeScratch).
inline constexpr int64_t kKeptDecodeBytes = int64_t{16} << 20;

// Registers `buffer` (a thread_local's, or an object's while it lives on
// this thread) as this thread's decode scratch; Forget before it is
// destroyed (ScratchBuffer does both).
void RegisterDecodeScratch(std::vector<uint8_t>* buffer);
void ForgetDecodeScratch(std::vector<uint8_t>* buffer);
// Frees this thread's decode scratch buffers over kKeptDecodeBytes: the
// decode pools call it when a worker finds no work.
void TrimDecodeScratch();

// A byte buffer registered as decode scratch for its lifetime: a
// thread_local, or an object made and destroyed on one thread (its
// registration is that thread's).
struct ScratchBuffer {
  ScratchBuffer() { RegisterDecodeScratch(&bytes); }
  ~ScratchBuffer() { ForgetDecodeScratch(&bytes); }
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  std::vector<uint8_t> bytes;
};

struct DecodeLimits {
  int64_t max_pixels = 100'000'000;  // width x height of the source.
  int max_scans = 100;               // Progressive scans per image.
  // Memory libjpeg may need for one image: the whole-image coefficient
  // buffer of a progressive (or region-decoded) file plus the output.
  int64_t max_bytes = int64_t{1} << 30;
  // Asked, with the bytes a decode over kKeptDecodeBytes needs, after its
  // header is read and before it allocates: a token held until the
  // picture is done with (Image::reserved), or the error the decode then
  // ends with. With `wait` false it answers at once: a token, or null when
  // there is no room now. Null: nothing is charged.
  std::function<absl::StatusOr<std::shared_ptr<void>>(int64_t bytes, bool wait)> reserve;
};

// For a decode needing `bytes`: *token from limits.reserve when it is set
// and `bytes` is over kKeptDecodeBytes (else null), or its error. A decode
// of kKeptDecodeBytes or less first trims this thread's decode scratch,
// and so does one that must wait for room (nothing uncharged is kept
// while it waits).
absl::Status ReserveDecode(const DecodeLimits& limits, int64_t bytes,
                           std::shared_ptr<void>* token);

// What a JPEG's header says.
struct JpegInfo {
  int width = 0, height = 0;
  int components = 0;  // 1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK.
  bool cmyk = false;
  bool progressive = false;
  bool arithmetic = false;   // Arithmetic-coded, not Huffman.
  bool ycc_or_gray = false;  // Stored as YCbCr or gray: not RGB, CMYK, YCCK.
  bool plain_chroma = true;  // Every component past the first is sampled 1 x 1.
  // An MCU's pixels: 8 x 8 for gray, 8 x the largest sampling factors else.
  int mcu_width = 8, mcu_height = 8;
};

class JpegDecoder {
 public:
  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  // Reads the header once, asks `plan(width, height)` what to decode, and
  // decodes at scale eighths/8 (1..8) the part of the scaled image covering
  // `need` (scaled coordinates, clamped; whole rows unless `crop`).
  // INVALID_ARGUMENT for empty input, DATA_LOSS for data that is not a
  // complete JPEG, RESOURCE_EXHAUSTED over a limit (which one, and the
  // figures, in the message).
  absl::Status Decode(const uint8_t* data, size_t size,
                      const std::function<RegionRequest(int width, int height)>& plan,
                      DecodedRegion* out);

  // Reads only the header. Errors as Decode's (the pixel limit included).
  absl::Status ReadInfo(const uint8_t* data, size_t size, JpegInfo* info);

  // The whole image at full scale.
  absl::Status Decode(const uint8_t* data, size_t size, RgbImage* out);

  void set_limits(const DecodeLimits& limits) { limits_ = limits; }
  const DecodeLimits& limits() const { return limits_; }

 private:
  struct State;
  std::unique_ptr<State> state_;
  DecodeLimits limits_;
};

// This thread's decoder, created on first use.
JpegDecoder& ThreadLocalDecoder();

// libjpeg's scaled size: ceil(size * eighths / 8).
inline int ScaledSize(int size, int eighths) { return (size * eighths + 7) / 8; }

}  // namespace stoker

#endif  // STOKER_SERVER_IMAGING_JPEG_H_
