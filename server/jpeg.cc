#include "server/jpeg.h"

#include <turbojpeg.h>

#include "absl/strings/str_cat.h"

namespace stoker {
namespace {
constexpr int64_t kMaxPixels = int64_t{1} << 28;
}  // namespace

JpegDecoder::JpegDecoder() : handle_(tjInitDecompress()) {}

JpegDecoder::~JpegDecoder() {
  if (handle_ != nullptr) tjDestroy(static_cast<tjhandle>(handle_));
}

absl::Status JpegDecoder::Decode(const uint8_t* data, size_t size,
                                 RgbImage* out) {
  if (handle_ == nullptr) {
    return absl::InternalError("TurboJPEG decompressor could not be created");
  }
  if (size == 0) return absl::InvalidArgumentError("empty file");
  auto h = static_cast<tjhandle>(handle_);
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(h, data, size, &width, &height, &subsamp,
                          &colorspace) != 0) {
    return absl::DataLossError(
        absl::StrCat("not a JPEG: ", tjGetErrorStr2(h)));
  }
  if (width <= 0 || height <= 0 ||
      int64_t{width} * height > kMaxPixels) {
    return absl::ResourceExhaustedError(
        absl::StrCat("JPEG is ", width, "x", height, ", over the pixel limit"));
  }
  out->width = width;
  out->height = height;
  out->pixels.resize(static_cast<size_t>(width) * height * 3);
  if (tjDecompress2(h, data, size, out->pixels.data(), width, width * 3,
                    height, TJPF_RGB, TJFLAG_ACCURATEDCT) != 0) {
    return absl::DataLossError(
        absl::StrCat("corrupt JPEG: ", tjGetErrorStr2(h)));
  }
  return absl::OkStatus();
}

JpegDecoder& ThreadLocalDecoder() {
  thread_local JpegDecoder decoder;
  return decoder;
}

}  // namespace stoker
