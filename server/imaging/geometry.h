// Composed 2-D geometry: what a chain of resize / crop / pad / flip ops makes
// of a picture, kept as one mapping from the output canvas back to the
// source, so each field is resampled once, from its source pixels, and a
// JPEG decoder can be told the scale and region it needs before decoding.
//
// A Canvas is the picture after the ops so far: `w` x `h` pixels, of which
// the content rectangle shows the source box `src` (mirrored when flipped);
// the rest is padding. Ops change the canvas; nothing touches pixels until
// Render. Value type; no state beyond its fields.
#ifndef STOKER_SERVER_IMAGING_GEOMETRY_H_
#define STOKER_SERVER_IMAGING_GEOMETRY_H_

#include <cstdint>

#include "server/imaging/transform.h"

namespace stoker {

struct Canvas {
  int w = 0, h = 0;                // Canvas size.
  double cx = 0, cy = 0;           // Content rectangle, in canvas pixels.
  double cw = 0, ch = 0;
  CropBox src;                     // Source box the content shows; src.flip:
                                   // mirrored horizontally.
  bool vflip = false;              // Mirrored vertically.
  Filter filter = Filter::kBilinear;
  uint32_t fill = 0;               // Images: the padding's value.

  // The whole source, unchanged.
  static Canvas Source(int width, int height);

  // True while the content fills the canvas exactly (no padding).
  bool Full() const { return cx == 0 && cy == 0 && cw == w && ch == h; }

  // Scales the canvas to width x height.
  void Resize(int width, int height);
  // torchvision's Resize(size): the shorter side becomes `size`, the longer
  // int(size * long / short).
  void ResizeShorter(int size);
  // The longer side becomes `size`, the shorter round(size * short / long).
  void ResizeLonger(int size);
  // ResizeLonger, then centered on a size x size canvas.
  void Letterbox(int size);
  // Keeps the window [x, x + width) x [y, y + height) of the canvas; parts
  // outside it become padding.
  void Crop(int x, int y, int width, int height);
  // torchvision's CenterCrop offsets (rounded half to even).
  void CenterCrop(int width, int height);
  void FlipHorizontal();
  void FlipVertical();
};

// The output size and where content lands, in whole pixels, and the source
// box that fills it (rounded outward from a fractional content rectangle).
struct RenderPlan {
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // Content in the output.
  CropBox box;                          // Source box for [x0, x1) x [y0, y1).
  bool empty() const { return x1 <= x0 || y1 <= y0; }
};
RenderPlan PlanRender(const Canvas& c, int src_w, int src_h);

// Writes the canvas: padding `pad` (one element of elem_bytes, every
// channel), content resampled from `src` (packed, src_w x src_h, channels x
// elem_bytes per pixel; the box is in its coordinates after subtracting
// (off_x, off_y) and scaling by `scale` = src size / source size) with the
// canvas's filter and flips. `dst` is c.w x c.h x channels packed.
void Render(const Canvas& c, const uint8_t* src, int src_w, int src_h,
            int channels, int elem_bytes, const RenderPlan& plan,
            double scale_x, double scale_y, int off_x, int off_y,
            uint32_t pad, uint8_t* dst);

}  // namespace stoker

#endif  // STOKER_SERVER_IMAGING_GEOMETRY_H_
