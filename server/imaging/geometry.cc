#include "server/imaging/geometry.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace stoker {

Canvas Canvas::Source(int width, int height) {
  Canvas c;
  c.w = width;
  c.h = height;
  c.cw = width;
  c.ch = height;
  c.src = CropBox{0, 0, static_cast<double>(width), static_cast<double>(height), false};
  return c;
}

void Canvas::Resize(int width, int height) {
  if (Full()) {  // Exact: no rounding creeps into the box's scale.
    cw = width;
    ch = height;
  } else {
    const double fx = static_cast<double>(width) / w;
    const double fy = static_cast<double>(height) / h;
    cx *= fx;
    cw *= fx;
    cy *= fy;
    ch *= fy;
  }
  w = width;
  h = height;
}

void Canvas::ResizeShorter(int size) {
  if (w <= h) {
    Resize(size, static_cast<int>(static_cast<int64_t>(size) * h / w));
  } else {
    Resize(static_cast<int>(static_cast<int64_t>(size) * w / h), size);
  }
}

void Canvas::ResizeLonger(int size) {
  if (w >= h) {
    Resize(size, std::max(1, static_cast<int>(std::lround(double(size) * h / w))));
  } else {
    Resize(std::max(1, static_cast<int>(std::lround(double(size) * w / h))), size);
  }
}

void Canvas::Letterbox(int size) {
  ResizeLonger(size);
  Crop(-((size - w) / 2), -((size - h) / 2), size, size);
}

void Canvas::Crop(int x, int y, int width, int height) {
  // Source pixels per canvas pixel, taken before anything changes: the
  // preset's box is exactly offset * k and size * k, as torchvision's.
  const double kx = src.w / cw, ky = src.h / ch;
  const double a0 = cx - x, b0 = cy - y;  // Content in the new canvas.
  const double a1 = std::max(a0, 0.0), b1 = std::max(b0, 0.0);
  const double a2 = std::min(a0 + cw, double(width)), b2 = std::min(b0 + ch, double(height));
  if (a2 <= a1 || b2 <= b1) {  // Nothing of the source is left.
    cx = cy = cw = ch = 0;
    src.w = src.h = 0;
  } else {
    // Clipped on the left in the canvas is clipped on the right in the
    // source when mirrored.
    src.x += (src.flip ? (a0 + cw) - a2 : a1 - a0) * kx;
    src.y += (vflip ? (b0 + ch) - b2 : b1 - b0) * ky;
    src.w = (a2 - a1) * kx;
    src.h = (b2 - b1) * ky;
    cx = a1;
    cy = b1;
    cw = a2 - a1;
    ch = b2 - b1;
  }
  w = width;
  h = height;
}

void Canvas::CenterCrop(int width, int height) {
  Crop(static_cast<int>(std::nearbyint((w - width) / 2.0)),
       static_cast<int>(std::nearbyint((h - height) / 2.0)), width, height);
}

void Canvas::FlipHorizontal() {
  cx = w - (cx + cw);
  src.flip = !src.flip;
}

void Canvas::FlipVertical() {
  cy = h - (cy + ch);
  vflip = !vflip;
}

RenderPlan PlanRender(const Canvas& c, int src_w, int src_h) {
  RenderPlan p;
  if (c.cw <= 0 || c.ch <= 0) return p;
  p.box = c.src;
  if (c.Full()) {
    p.x1 = c.w;
    p.y1 = c.h;
  } else {
    p.x0 = static_cast<int>(std::lround(c.cx));
    p.y0 = static_cast<int>(std::lround(c.cy));
    p.x1 = std::min(c.w, static_cast<int>(std::lround(c.cx + c.cw)));
    p.y1 = std::min(c.h, static_cast<int>(std::lround(c.cy + c.ch)));
    if (p.empty()) return p;
    // Whole output pixels: stretch the box by the rounding.
    const double kx = c.src.w / c.cw, ky = c.src.h / c.ch;
    const double dl = p.x0 - c.cx, dr = (c.cx + c.cw) - p.x1;
    const double dt = p.y0 - c.cy, db = (c.cy + c.ch) - p.y1;
    p.box.x += (c.src.flip ? dr : dl) * kx;
    p.box.y += (c.vflip ? db : dt) * ky;
    p.box.w = (p.x1 - p.x0) * kx;
    p.box.h = (p.y1 - p.y0) * ky;
  }
  // Inside the source.
  p.box.x = std::clamp(p.box.x, 0.0, double(src_w));
  p.box.y = std::clamp(p.box.y, 0.0, double(src_h));
  p.box.w = std::clamp(p.box.w, 1e-9, src_w - p.box.x);
  p.box.h = std::clamp(p.box.h, 1e-9, src_h - p.box.y);
  return p;
}

void Render(const Canvas& c, const uint8_t* src, int src_w, int src_h,
            int channels, int elem_bytes, const RenderPlan& plan,
            double scale_x, double scale_y, int off_x, int off_y,
            uint32_t pad, uint8_t* dst) {
  const size_t px = static_cast<size_t>(channels) * elem_bytes;
  const bool full = plan.x0 == 0 && plan.y0 == 0 && plan.x1 == c.w && plan.y1 == c.h;
  if (!full) {  // Padding first; the content overwrites its part.
    uint8_t elem[2];
    if (elem_bytes == 2) {
      const uint16_t v = static_cast<uint16_t>(pad);
      std::memcpy(elem, &v, 2);
    } else {
      elem[0] = static_cast<uint8_t>(pad);
    }
    const size_t n = static_cast<size_t>(c.w) * c.h * channels;
    for (size_t i = 0; i < n; ++i) std::memcpy(dst + i * elem_bytes, elem, elem_bytes);
  }
  if (plan.empty()) return;
  CropBox box = plan.box;
  box.x = box.x * scale_x - off_x;
  box.y = box.y * scale_y - off_y;
  box.w *= scale_x;
  box.h *= scale_y;
  const int ow = plan.x1 - plan.x0, oh = plan.y1 - plan.y0;
  thread_local std::vector<uint8_t> tmp;
  uint8_t* out = dst;
  if (!full) {
    tmp.resize(static_cast<size_t>(ow) * oh * px);
    out = tmp.data();
  }
  Resample(src, src_w, src_h, channels, elem_bytes, box, ow, oh, c.filter, out);
  if (c.vflip) {
    thread_local std::vector<uint8_t> row;
    const size_t rb = static_cast<size_t>(ow) * px;
    row.resize(rb);
    for (int y = 0; y < oh / 2; ++y) {
      uint8_t* a = out + y * rb;
      uint8_t* b = out + (oh - 1 - y) * rb;
      std::memcpy(row.data(), a, rb);
      std::memcpy(a, b, rb);
      std::memcpy(b, row.data(), rb);
    }
  }
  if (!full) {
    for (int y = 0; y < oh; ++y) {
      std::memcpy(dst + ((static_cast<size_t>(plan.y0) + y) * c.w + plan.x0) * px,
                  out + static_cast<size_t>(y) * ow * px, static_cast<size_t>(ow) * px);
    }
  }
}

}  // namespace stoker
