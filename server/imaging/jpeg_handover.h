// Which JPEGs the daemon hands to a decoder other than its own libjpeg: a
// trainer's (client decode) or a GPU's hardware JPEG engine. Everything
// else stays with the daemon's CPU decoders, which take every file they
// can decode and name what is wrong with the rest.
//
// Both decoders are given only a JPEG within the byte and pixel limits,
// not CMYK or YCCK, that ends in its end-of-image marker: a file cut short
// is the daemon's to decode or fail, since another decoder may fill the
// missing rows with gray and say nothing. A hardware engine decodes
// baseline Huffman-coded YCbCr or gray pictures whose chroma is sampled
// 1 x 1 (4:4:4, 4:2:2, 4:2:0, 4:4:0, 4:1:1): not progressive or
// arithmetic-coded files, not RGB-coded ones (whose colours it would
// convert as YCbCr), not unusual samplings. On the GPU the engine's own
// nvjpegDecodeBatchedSupportedEx has the last word.
//
// The checks come in two steps, so that a file that fails on its bytes
// costs no header read. Stateless; thread-safe.
#ifndef STOKER_SERVER_IMAGING_JPEG_HANDOVER_H_
#define STOKER_SERVER_IMAGING_JPEG_HANDOVER_H_

#include <cstddef>
#include <cstdint>

#include "server/imaging/jpeg.h"

namespace stoker {

struct HandOverRule {
  uint64_t max_bytes = 0;
  uint64_t max_pixels = 0;
  bool hardware = false;  // A hardware engine's further limits.
};

// Why a JPEG stays with the daemon, or kHandedOver.
enum class Kept {
  kHandedOver,
  kNotJpeg,    // The bytes are not a JPEG's.
  kBytes,      // Over max_bytes.
  kCutShort,   // No end-of-image marker in its last 64 bytes.
  kPixels,     // Over max_pixels.
  kColor,      // CMYK or YCCK; for hardware, also RGB-coded.
  kCoding,     // For hardware: progressive or arithmetic-coded.
  kSampling,   // For hardware: a chroma component not sampled 1 x 1.
};

// Its name in logs and metrics ("cut_short").
const char* KeptName(Kept kept);

// The checks on the file's bytes.
Kept KeptByBytes(const uint8_t* data, size_t size, const HandOverRule& rule);

// The checks on its header (JpegDecoder::ReadInfo's).
Kept KeptByHeader(const JpegInfo& info, const HandOverRule& rule);

}  // namespace stoker

#endif  // STOKER_SERVER_IMAGING_JPEG_HANDOVER_H_
