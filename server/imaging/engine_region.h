// The region a JPEG engine that decodes whole MCUs is asked for, so that a
// crop's pixels come out exactly as a whole decode's would.
//
// A hardware JPEG engine (a GPU's) decodes at full scale the MCUs a region
// covers. What it does at the region's edges is its own: it may treat them
// as the picture's edges, repeating the last chroma sample where a whole
// decode blends in the next one (libjpeg's smooth upsampling reaches one
// chroma sample across: two pixels at 2x subsampling). So the engine is
// asked for the crop widened to the MCU grid and, where the picture's
// chroma is subsampled, by one more MCU on every side that is not the
// picture's own edge. No pixel of the crop then lies within reach of a
// region edge, and it is the whole decode's pixel whatever the engine does
// there. 4:4:4 and gray pictures have no upsampling and their blocks decode
// alone: the grid alone is exact for them.
//
// engine_region_test checks the rule against a decoder that does treat a
// region's edges as the picture's: libjpeg-turbo decoding the region cut
// losslessly out of the file (its coefficients unchanged).
//
// Stateless; thread-safe.
#ifndef STOKER_SERVER_IMAGING_ENGINE_REGION_H_
#define STOKER_SERVER_IMAGING_ENGINE_REGION_H_

#include "server/imaging/jpeg.h"

namespace stoker {

// The rectangle of a width x height picture, whose MCUs are mcu_width x
// mcu_height pixels (JpegInfo's), that an engine decodes for `req` (full
// scale: req.eighths is not read). `req.need` is clamped as RegionWindow
// clamps it (the whole picture unless req.crop or for an empty need, whole
// rows when it holds no column), moved out to the MCU grid, then widened
// by one MCU on each side
// that the picture goes on past when its MCUs are larger than 8x8. The
// result starts on the grid and lies within the picture.
PixelRect EngineRegion(const RegionRequest& req, int width, int height,
                       int mcu_width, int mcu_height);

}  // namespace stoker

#endif  // STOKER_SERVER_IMAGING_ENGINE_REGION_H_
