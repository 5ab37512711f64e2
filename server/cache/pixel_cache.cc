#include "server/cache/pixel_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "util/status_macros.h"
#include "util/cache_key.h"

namespace stoker {
namespace {

// An entry: this header, then the packed pixels.
struct Header {
  int32_t width, height, channels, elem_bytes;
  int32_t form;  // Of an exact entry, how a decode for a region keeps it.
  int32_t source_width, source_height;  // The file's picture.
  int32_t eighths;  // The DCT scale it was decoded at (8: none).
  int32_t align;    // A JPEG's iMCU column width at that scale.
};
enum Form : int32_t {
  kWhole = 0,       // Decoded whole whatever the region.
  kPngRows = 1,     // A PNG whose rows decode alone (PngRowsAlone).
  kJpegRegion = 2,  // A JPEG: RegionWindow of the scale it was kept at.
  kJpegWhole = 3    // A JPEG whose regions decode otherwise (region_dependent).
};

// An L2 value is trusted only if its header matches its length.
bool Valid(const std::string& entry) {
  if (entry.size() < sizeof(Header)) return false;
  Header h;
  std::memcpy(&h, entry.data(), sizeof(h));
  return h.width > 0 && h.height > 0 && h.channels > 0 && h.elem_bytes > 0 &&
         h.source_width > 0 && h.source_height > 0 && h.eighths >= 1 && h.eighths <= 8 &&
         h.align >= 1 && h.form >= kWhole && h.form <= kJpegWhole && h.channels <= 4 &&
         h.elem_bytes <= 2 &&
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
                                    Filter filter, int eighths) {
  thread_local ScratchImage image;
  absl::Cleanup done_with = [] { DoneWith(&image); };
  int out_w = 0, out_h = 0, source_w = 0, source_h = 0;
  const bool jpeg = SniffImageFormat(data, size) == ImageFormat::kJpeg;
  eighths = jpeg && max_side <= 0 ? std::clamp(eighths, 1, 8) : 8;
  absl::Status s = DecodeImage(
      data, size, request,
      [&](int w, int h) {
        source_w = w;
        source_h = h;
        if (max_side <= 0) {  // Exact: whole, at the DCT scale asked.
          out_w = ScaledSize(w, eighths);
          out_h = ScaledSize(h, eighths);
          return RegionRequest{eighths, PixelRect{0, 0, out_w, out_h}, false};
        }
        BoundedSize(w, h, max_side, &out_w, &out_h);
        int e = 1;  // The smallest DCT scale still covering the bounded size.
        while (e < 8 && (ScaledSize(w, e) < out_w || ScaledSize(h, e) < out_h)) ++e;
        return RegionRequest{e, PixelRect{0, 0, ScaledSize(w, e), ScaledSize(h, e)}, false};
      },
      &image);
  if (!s.ok()) return s;
  if (max_side <= 0 && (image.width != out_w || image.height != out_h)) {
    return absl::InternalError(absl::StrCat("a whole decode gave ", image.width, "x",
                                            image.height, " of ", out_w, "x", out_h));
  }
  const size_t pixel_bytes = static_cast<size_t>(image.channels) * image.elem_bytes;
  auto entry = std::make_shared<std::string>(
      sizeof(Header) + static_cast<size_t>(out_w) * out_h * pixel_bytes, '\0');
  const Header header{out_w,
                      out_h,
                      image.channels,
                      image.elem_bytes,
                      jpeg ? (image.region_dependent ? kJpegWhole : kJpegRegion)
                      : PngRowsAlone(data, size) ? kPngRows
                                                 : kWhole,
                      source_w,
                      source_h,
                      eighths,
                      std::max(1, image.align)};
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

KeptPicture KeptOf(const Bytes& entry) {
  Header h;
  std::memcpy(&h, entry->data(), sizeof(h));
  return {h.source_width, h.source_height, h.eighths,
          h.form == kJpegRegion || h.form == kJpegWhole, h.form == kJpegWhole};
}

absl::StatusOr<ImageView> ExactView(const Bytes& entry, const RegionRequest& want,
                                    Image* scratch) {
  Header h;
  std::memcpy(&h, entry->data(), sizeof(h));
  ImageView v = PixelsOf(entry);
  const size_t px = static_cast<size_t>(h.channels) * h.elem_bytes;
  if (h.form == kPngRows) {
    int y0 = 0, y1 = h.height;
    PngRowWindow(want, h.height, &y0, &y1);
    v.pixels += static_cast<size_t>(y0) * h.width * px;
    v.height = y1 - y0;
    v.y = y0;
    return v;
  }
  if (h.form == kWhole) return v;
  if (std::clamp(want.eighths, 1, 8) != h.eighths) {
    return absl::InternalError(absl::StrCat("a picture kept at a DCT scale of ", h.eighths,
                                            "/8 was asked for at ", want.eighths, "/8"));
  }
  if (h.form == kJpegWhole) {
    if (!want.crop) return v;
    return absl::FailedPreconditionError(
        "a progressive JPEG with coefficients left unsent is kept for whole decodes only");
  }
  const PixelRect r = RegionWindow(want, h.width, h.height, h.align);
  v.x = r.x0;
  v.y = r.y0;
  v.width = r.x1 - r.x0;
  v.height = r.y1 - r.y0;
  v.pixels += (static_cast<size_t>(r.y0) * h.width + r.x0) * px;
  if (v.width == h.width) return v;  // Whole rows lie packed already.
  // Packed, as the renderer reads a decode's region.
  const size_t row = static_cast<size_t>(v.width) * px;
  scratch->pixels.resize(row * v.height);
  for (int y = 0; y < v.height; ++y) {
    std::memcpy(&scratch->pixels[y * row], v.pixels + static_cast<size_t>(y) * h.width * px,
                row);
  }
  v.pixels = scratch->pixels.data();
  return v;
}

std::string PixelCache::Key(const SourceKey& file, int max_side,
                            const ImageRequest& request, int eighths) {
  return CacheKey({"px2", static_cast<int64_t>(max_side), static_cast<int64_t>(eighths),
                   static_cast<int64_t>(request.channels),
                   static_cast<int64_t>(request.elem_bytes), request.indices ? "i" : "-",
                   file.file});
}

namespace {
std::string RamKey(const std::string& key, const FileVersion& version) {
  return CacheKey({key, version.size, version.mtime_ns, version.ctime_ns});
}
}  // namespace

Bytes PixelCache::Lookup(const SampleSource& source, const SourceKey& file,
                         const std::string& key, bool* versioned, bool l2, bool refresh) {
  *versioned = l2 && l2_ != nullptr && source.Versioned();
  if (Bytes hit = ram_->Lookup(RamKey(key, file.version), refresh)) return hit;
  if (!*versioned) return nullptr;
  std::string value;
  if (l2_->Lookup(key, file.version, &value) != L2Cache::Result::kHit || !Valid(value)) {
    return nullptr;
  }
  Bytes entry = std::make_shared<const std::string>(std::move(value));
  ram_->Insert(RamKey(key, file.version), entry);
  return entry;
}

Bytes PixelCache::Peek(const SourceKey& file, const std::string& key) {
  return ram_->Peek(RamKey(key, file.version));
}

absl::StatusOr<Bytes> PixelCache::Fill(const std::string& key, const Bytes& encoded,
                                       const ImageRequest& request, int max_side,
                                       int eighths, Filter filter, bool versioned,
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
                        request, max_side, filter, eighths);
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
