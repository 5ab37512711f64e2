#include "server/imaging/jpeg_handover.h"

#include "server/imaging/decode.h"

namespace stoker {
namespace {

// Whether the file's last 64 bytes hold the end-of-image marker.
bool EndsWithEoi(const uint8_t* data, size_t size) {
  const size_t from = size > 64 ? size - 64 : 0;
  for (size_t i = size; i-- > from + 1;) {
    if (data[i - 1] == 0xFF && data[i] == 0xD9) return true;
  }
  return false;
}

}  // namespace

const char* KeptName(Kept kept) {
  switch (kept) {
    case Kept::kHandedOver: return "handed_over";
    case Kept::kNotJpeg: return "not_jpeg";
    case Kept::kBytes: return "bytes";
    case Kept::kCutShort: return "cut_short";
    case Kept::kPixels: return "pixels";
    case Kept::kColor: return "color";
    case Kept::kCoding: return "coding";
    case Kept::kSampling: return "sampling";
  }
  return "unknown";
}

Kept KeptByBytes(const uint8_t* data, size_t size, const HandOverRule& rule) {
  if (size > rule.max_bytes) return Kept::kBytes;
  if (SniffImageFormat(data, size) != ImageFormat::kJpeg) return Kept::kNotJpeg;
  if (!EndsWithEoi(data, size)) return Kept::kCutShort;
  return Kept::kHandedOver;
}

Kept KeptByHeader(const JpegInfo& info, const HandOverRule& rule) {
  if (info.cmyk || (rule.hardware && !info.ycc_or_gray)) return Kept::kColor;
  if (uint64_t(info.width) * uint64_t(info.height) > rule.max_pixels) return Kept::kPixels;
  if (!rule.hardware) return Kept::kHandedOver;
  if (info.progressive || info.arithmetic) return Kept::kCoding;
  if (!info.plain_chroma) return Kept::kSampling;
  return Kept::kHandedOver;
}

}  // namespace stoker
