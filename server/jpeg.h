// JPEG decoding with libjpeg-turbo's TurboJPEG API, errors as absl::Status.
//
// A JpegDecoder owns one TurboJPEG handle; it is not thread-safe, so each
// decode thread keeps its own (see ThreadLocalDecoder()). Output is packed
// RGB (3 bytes per pixel, stride = width * 3) into a caller-owned buffer that
// is reused across calls. Grayscale sources come out as RGB. Anything
// libjpeg-turbo warns about (a truncated file, corrupt data) is an error:
// a sample is either decoded faithfully or flagged.
#ifndef STOKER_SERVER_JPEG_H_
#define STOKER_SERVER_JPEG_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace stoker {

struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // width * height * 3, row-major.
};

class JpegDecoder {
 public:
  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  // INVALID_ARGUMENT for empty input, DATA_LOSS for data that is not a
  // complete, decodable JPEG (message from libjpeg-turbo), RESOURCE_EXHAUSTED
  // for images over 2^28 pixels.
  absl::Status Decode(const uint8_t* data, size_t size, RgbImage* out);

 private:
  void* handle_;  // tjhandle
};

// This thread's decoder, created on first use.
JpegDecoder& ThreadLocalDecoder();

}  // namespace stoker

#endif  // STOKER_SERVER_JPEG_H_
