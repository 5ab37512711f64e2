#include "server/imaging/engine_region.h"

#include <algorithm>

namespace stoker {
namespace {

// [*lo, *hi) moved out to multiples of `step` and by `margin` more steps,
// within [0, size).
void Widen(int step, int margin, int size, int* lo, int* hi) {
  *lo = std::max(0, (*lo / step - margin) * step);
  *hi = std::min(size, ((*hi + step - 1) / step + margin) * step);
}

}  // namespace

PixelRect EngineRegion(const RegionRequest& req, int width, int height,
                       int mcu_width, int mcu_height) {
  PixelRect r = RegionWindow(req, width, height, 1);
  if (r.x1 <= r.x0 || r.y1 <= r.y0) return r;
  const int mw = std::max(1, mcu_width), mh = std::max(1, mcu_height);
  const int margin = mw > 8 || mh > 8 ? 1 : 0;
  Widen(mw, margin, width, &r.x0, &r.x1);
  Widen(mh, margin, height, &r.y0, &r.y1);
  return r;
}

}  // namespace stoker
