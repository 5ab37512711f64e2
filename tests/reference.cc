#include "tests/reference.h"

#include <turbojpeg.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace stoker::reference {

absl::StatusOr<Image> DecodeFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)),
                    std::istreambuf_iterator<char>());
  tjhandle h = tjInitDecompress();
  Image img;
  int sub, cs;
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  int rc = tjDecompressHeader3(h, data, bytes.size(), &img.width, &img.height,
                               &sub, &cs);
  if (rc == 0) {
    img.rgb.resize(static_cast<size_t>(img.width) * img.height * 3);
    rc = tjDecompress2(h, data, bytes.size(), img.rgb.data(), img.width, 0,
                       img.height, TJPF_RGB, TJFLAG_ACCURATEDCT);
  }
  tjDestroy(h);
  if (rc != 0) return absl::DataLossError(absl::StrCat("cannot decode ", path));
  return img;
}

namespace {

// Weight of source index `i` for an output centred at `center`.
double Tap(int i, double center, double filterscale) {
  double t = std::fabs((i + 0.5 - center) / filterscale);
  return t < 1.0 ? 1.0 - t : 0.0;
}

}  // namespace

Image ResampleRegion(const Image& src, double x, double y, double w, double h,
                     int out_w, int out_h, bool flip) {
  Image out;
  out.width = out_w;
  out.height = out_h;
  out.rgb.resize(static_cast<size_t>(out_w) * out_h * 3);
  const double sx = w / out_w, sy = h / out_h;
  const double fx = std::max(1.0, sx), fy = std::max(1.0, sy);
  for (int oy = 0; oy < out_h; ++oy) {
    const double cy = y + (oy + 0.5) * sy;
    for (int ox = 0; ox < out_w; ++ox) {
      const double cx = x + (ox + 0.5) * sx;
      double acc[3] = {0, 0, 0}, total = 0;
      for (int iy = static_cast<int>(cy - fy) - 1; iy <= cy + fy + 1; ++iy) {
        if (iy < 0 || iy >= src.height) continue;
        double wy = Tap(iy, cy, fy);
        if (wy == 0) continue;
        for (int ix = static_cast<int>(cx - fx) - 1; ix <= cx + fx + 1; ++ix) {
          if (ix < 0 || ix >= src.width) continue;
          double wgt = wy * Tap(ix, cx, fx);
          if (wgt == 0) continue;
          const uint8_t* p = &src.rgb[(static_cast<size_t>(iy) * src.width + ix) * 3];
          for (int c = 0; c < 3; ++c) acc[c] += wgt * p[c];
          total += wgt;
        }
      }
      const int dx = flip ? out_w - 1 - ox : ox;
      for (int c = 0; c < 3; ++c) {
        double v = total > 0 ? acc[c] / total : 0;
        out.rgb[(static_cast<size_t>(oy) * out_w + dx) * 3 + c] =
            static_cast<uint8_t>(std::lround(std::min(255.0, std::max(0.0, v))));
      }
    }
  }
  return out;
}

Image ValTransform(const Image& src, int size) {
  const int resize = static_cast<int>(std::lround(size * 256.0 / 224.0));
  int rw = resize, rh = resize;
  if (src.width <= src.height) {
    rh = static_cast<int>(static_cast<long>(resize) * src.height / src.width);
  } else {
    rw = static_cast<int>(static_cast<long>(resize) * src.width / src.height);
  }
  Image resized = ResampleRegion(src, 0, 0, src.width, src.height, rw, rh, false);
  const int top = static_cast<int>(std::nearbyint((rh - size) / 2.0));
  const int left = static_cast<int>(std::nearbyint((rw - size) / 2.0));
  Image out;
  out.width = out.height = size;
  for (int y = 0; y < size; ++y) {
    const uint8_t* row = &resized.rgb[(static_cast<size_t>(y + top) * rw + left) * 3];
    out.rgb.insert(out.rgb.end(), row, row + size * 3);
  }
  return out;
}

Diff Compare(const uint8_t* a, const uint8_t* b, size_t n) {
  Diff d;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    int v = std::abs(int{a[i]} - int{b[i]});
    d.max_abs = std::max(d.max_abs, v);
    sum += v;
  }
  d.mean_abs = n ? sum / n : 0;
  return d;
}

}  // namespace stoker::reference
