#include "server/cache/pixel_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "util/status_macros.h"
#include "util/cache_key.h"

namespace stoker {
namespace {

// An entry: this header, then the packed pixels.
struct Header {
  int32_t width, height, channels, elem_bytes;
  int32_t png_rows;  // 1: a PNG whose rows decode alone (PngRowsAlone).
};

int CeilEighths(int v, int e) { return (v * e + 7) / 8; }

// An L2 value is trusted only if its header matches its length.
bool Valid(const std::string& entry) {
  if (entry.size() < sizeof(Header)) return false;
  Header h;
  std::memcpy(&h, entry.data(), sizeof(h));
  return h.width > 0 && h.height > 0 && h.channels > 0 && h.elem_bytes > 0 &&
         entry.size() == sizeof(Header) + static_cast<uint64_t>(h.width) * h.height *
                                              h.channels * h.elem_bytes;
}

}  // namespace

void BoundedSize(int w, int h, int max_side, int* out_w, int* out_h) {
  const int longer = std::max(w, h);
  if (longer <= max_side) {
    *out_w = w;
    *out_h = h;
    return;
  }
  const double s = static_cast<double>(max_side) / longer;
  *out_w = w >= h ? max_side : std::max(1, static_cast<int>(std::lround(w * s)));
  *out_h = h > w ? max_side : std::max(1, static_cast<int>(std::lround(h * s)));
}

absl::StatusOr<Bytes> DecodeBounded(const uint8_t* data, size_t size,
                                    const ImageRequest& request, int max_side,
                                    Filter filter) {
  thread_local Image image;
  int out_w = 0, out_h = 0;
  absl::Status s = DecodeImage(
      data, size, request,
      [&](int w, int h) {
        if (max_side <= 0) {  // Exact: whole, at full scale.
          out_w = w;
          out_h = h;
          return RegionRequest{8, PixelRect{0, 0, w, h}, false};
        }
        BoundedSize(w, h, max_side, &out_w, &out_h);
        int e = 1;  // The smallest DCT scale still covering the bounded size.
        while (e < 8 && (CeilEighths(w, e) < out_w || CeilEighths(h, e) < out_h)) ++e;
        return RegionRequest{e, PixelRect{0, 0, CeilEighths(w, e), CeilEighths(h, e)}, false};
      },
      &image);
  if (!s.ok()) return s;
  const size_t pixel_bytes = static_cast<size_t>(image.channels) * image.elem_bytes;
  auto entry = std::make_shared<std::string>(
      sizeof(Header) + static_cast<size_t>(out_w) * out_h * pixel_bytes, '\0');
  const Header header{out_w, out_h, image.channels, image.elem_bytes,
                      PngRowsAlone(data, size) ? 1 : 0};
  std::memcpy(entry->data(), &header, sizeof(header));
  uint8_t* dst = reinterpret_cast<uint8_t*>(entry->data()) + sizeof(Header);
  if (max_side <= 0) {  // Exact: the whole decode's pixels.
    std::memcpy(dst, image.pixels.data(), static_cast<size_t>(out_w) * out_h * pixel_bytes);
    return Bytes(std::move(entry));
  }
  const CropBox whole{0, 0, static_cast<double>(image.width),
                      static_cast<double>(image.height), false};
  Resample(image.pixels.data(), image.width, image.height, image.channels,
           image.elem_bytes, whole, out_w, out_h,
           image.elem_bytes == 1 ? filter : Filter::kNearest, dst);
  return Bytes(std::move(entry));
}

ImageView PixelsOf(const Bytes& entry) {
  Header h;
  std::memcpy(&h, entry->data(), sizeof(h));
  return {reinterpret_cast<const uint8_t*>(entry->data()) + sizeof(Header),
          h.width, h.height, h.channels, h.elem_bytes, 0, 0, h.width, h.height};
}

ImageView ExactView(const Bytes& entry, const RegionRequest& want) {
  Header h;
  std::memcpy(&h, entry->data(), sizeof(h));
  ImageView v = PixelsOf(entry);
  if (h.png_rows != 1) return v;
  int y0 = 0, y1 = h.height;
  PngRowWindow(want, h.height, &y0, &y1);
  v.pixels += static_cast<size_t>(y0) * h.width * h.channels * h.elem_bytes;
  v.height = y1 - y0;
  v.y = y0;
  return v;
}

std::string PixelCache::Key(const SourceKey& file, int max_side,
                            const ImageRequest& request) {
  return CacheKey({"px", static_cast<int64_t>(max_side), static_cast<int64_t>(request.channels),
                   static_cast<int64_t>(request.elem_bytes), request.indices ? "i" : "-",
                   file.file});
}

namespace {
std::string RamKey(const std::string& key, const FileVersion& version) {
  return CacheKey({key, version.size, version.mtime_ns, version.ctime_ns});
}
}  // namespace

Bytes PixelCache::Lookup(const SampleSource& source, const SourceKey& file,
                         const std::string& key, bool* versioned, bool l2) {
  *versioned = l2 && l2_ != nullptr && source.Versioned();
  if (Bytes hit = ram_->Lookup(RamKey(key, file.version))) return hit;
  if (!*versioned) return nullptr;
  std::string value;
  if (l2_->Lookup(key, file.version, &value) != L2Cache::Result::kHit || !Valid(value)) {
    return nullptr;
  }
  Bytes entry = std::make_shared<const std::string>(std::move(value));
  ram_->Insert(RamKey(key, file.version), entry);
  return entry;
}

absl::StatusOr<Bytes> PixelCache::Fill(const std::string& key, const Bytes& encoded,
                                       const ImageRequest& request, int max_side,
                                       Filter filter, bool versioned,
                                       const FileVersion& version, int64_t owner,
                                       const std::function<bool(uint64_t)>& keep) {
  const std::string ram_key = RamKey(key, version);
  return fills_.Do(ram_key, [&]() -> absl::StatusOr<Bytes> {
    if (Bytes filled = ram_->Peek(ram_key)) return filled;  // Filled meanwhile.
    // Behind the exception barrier as a whole: a throw must not leave the
    // single flight's waiters waiting.
    return Guarded("decoding a picture", [&]() -> absl::StatusOr<Bytes> {
      absl::StatusOr<Bytes> entry =
          DecodeBounded(reinterpret_cast<const uint8_t*>(encoded->data()), encoded->size(),
                        request, max_side, filter);
      if (!entry.ok()) return entry;
      decodes_.fetch_add(1, std::memory_order_relaxed);
      if (keep && !keep((*entry)->size() + ram_key.size())) return entry;
      ram_->Insert(ram_key, *entry);
      if (versioned) l2_->Put(key, version, *entry, owner);
      return entry;
    });
  });
}

}  // namespace stoker
