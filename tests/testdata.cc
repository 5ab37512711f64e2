#include "tests/testdata.h"

#include <libdeflate.h>
#include <spng.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/rng.h"

namespace stoker::testdata {
namespace fs = std::filesystem;

namespace {

// Smoothly interpolated lattice noise in [0, 1).
class ValueNoise {
 public:
  ValueNoise(int cell, int width, int height, Rng& rng)
      : cell_(cell), gw_(width / cell + 2), gh_(height / cell + 2) {
    grid_.resize(static_cast<size_t>(gw_) * gh_);
    for (float& v : grid_) v = static_cast<float>(rng.Uniform01());
  }
  float At(int x, int y) const {
    float fx = static_cast<float>(x) / cell_, fy = static_cast<float>(y) / cell_;
    int ix = static_cast<int>(fx), iy = static_cast<int>(fy);
    float tx = fx - ix, ty = fy - iy;
    tx = tx * tx * (3 - 2 * tx);
    ty = ty * ty * (3 - 2 * ty);
    auto g = [&](int a, int b) { return grid_[static_cast<size_t>(b) * gw_ + a]; };
    float top = g(ix, iy) * (1 - tx) + g(ix + 1, iy) * tx;
    float bot = g(ix, iy + 1) * (1 - tx) + g(ix + 1, iy + 1) * tx;
    return top * (1 - ty) + bot * ty;
  }

 private:
  int cell_, gw_, gh_;
  std::vector<float> grid_;
};

}  // namespace

std::vector<uint8_t> PhotoLikeRgb(int width, int height, uint64_t seed) {
  Rng rng(MixSeed({seed, 0x50484f544fULL}));
  // Per channel: octaves of noise from large shapes to fine texture (1/f
  // like natural images), plus hard-edged regions and sensor-like grain.
  std::vector<uint8_t> out(static_cast<size_t>(width) * height * 3);
  const int cells[] = {97, 41, 17, 7, 3};
  const float amps[] = {0.45f, 0.25f, 0.16f, 0.12f, 0.10f};
  for (int c = 0; c < 3; ++c) {
    std::vector<ValueNoise> octaves;
    for (int cell : cells) octaves.emplace_back(cell, width, height, rng);
    ValueNoise regions(61, width, height, rng);
    const float base = static_cast<float>(rng.Uniform(40, 110));
    for (int y = 0; y < height; ++y) {
      for (int x = 0; x < width; ++x) {
        float v = 0;
        for (int o = 0; o < 5; ++o) v += amps[o] * octaves[o].At(x, y);
        float edge = regions.At(x, y) > 0.5f ? 45.f : 0.f;
        float grain = static_cast<float>(rng.Uniform(-26, 26));
        float p = base + 180.f * (v - 0.5f) + edge + grain;
        out[(static_cast<size_t>(y) * width + x) * 3 + c] =
            static_cast<uint8_t>(p < 0 ? 0 : (p > 255 ? 255 : p));
      }
    }
  }
  return out;
}

namespace {

// tjCompress2 into a string; pixel_size is 3 (RGB) or 4 (CMYK).
absl::StatusOr<std::string> Compress(const uint8_t* pixels, int width,
                                     int height, int pixel_format,
                                     int pixel_size, int tjsub, int quality,
                                     int flags) {
  tjhandle h = tjInitCompress();
  if (h == nullptr) return absl::InternalError("tjInitCompress failed");
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  int rc = tjCompress2(h, pixels, width, width * pixel_size, height,
                       pixel_format, &buf, &size, tjsub, quality, flags);
  std::string out;
  if (rc == 0) out.assign(reinterpret_cast<char*>(buf), size);
  std::string err = rc == 0 ? "" : tjGetErrorStr2(h);
  tjFree(buf);
  tjDestroy(h);
  if (rc != 0) return absl::InternalError(absl::StrCat("tjCompress2: ", err));
  return out;
}

}  // namespace

absl::StatusOr<std::string> EncodeJpeg(const std::vector<uint8_t>& rgb,
                                       int width, int height, int quality,
                                       Subsampling sub, bool progressive) {
  const int tjsub = sub == Subsampling::k444   ? TJSAMP_444
                    : sub == Subsampling::k422 ? TJSAMP_422
                    : sub == Subsampling::k420 ? TJSAMP_420
                                               : TJSAMP_GRAY;
  return Compress(rgb.data(), width, height, TJPF_RGB, 3, tjsub, quality,
                  progressive ? TJFLAG_PROGRESSIVE : 0);
}

absl::StatusOr<std::string> EncodeCmykJpeg(const std::vector<uint8_t>& rgb,
                                           int width, int height, int quality) {
  std::vector<uint8_t> cmyk(static_cast<size_t>(width) * height * 4);
  for (size_t i = 0, n = static_cast<size_t>(width) * height; i < n; ++i) {
    const uint8_t* p = &rgb[i * 3];
    const int k = std::max({p[0], p[1], p[2]});
    for (int c = 0; c < 3; ++c) {
      cmyk[i * 4 + c] = static_cast<uint8_t>(k ? (p[c] * 255 + k / 2) / k : 0);
    }
    cmyk[i * 4 + 3] = static_cast<uint8_t>(k);
  }
  // TurboJPEG writes CMYK as YCCK with an Adobe marker.
  return Compress(cmyk.data(), width, height, TJPF_CMYK, 4, TJSAMP_444,
                  quality, 0);
}

absl::StatusOr<std::string> FirstScans(const std::string& jpeg, int scans) {
  auto byte = [&](size_t i) { return static_cast<uint8_t>(jpeg[i]); };
  if (jpeg.size() < 4 || byte(0) != 0xFF || byte(1) != 0xD8)
    return absl::InvalidArgumentError("not a JPEG");
  size_t i = 2;
  int seen = 0;
  while (i + 4 <= jpeg.size() && byte(i) == 0xFF) {
    const uint8_t marker = byte(i + 1);
    const size_t length = (size_t{byte(i + 2)} << 8) | byte(i + 3);
    size_t end = i + 2 + length;
    if (marker == 0xDA) {  // A scan: its entropy-coded data runs to the next marker.
      while (end + 1 < jpeg.size() &&
             !(byte(end) == 0xFF && byte(end + 1) != 0 &&
               (byte(end + 1) < 0xD0 || byte(end + 1) > 0xD7))) {
        ++end;
      }
      if (++seen == scans) return jpeg.substr(0, end) + "\xFF\xD9";
    }
    i = end;
  }
  return absl::InvalidArgumentError("a JPEG with fewer scans than asked for");
}

TarWriter& TarWriter::Add(const std::string& name, const std::string& data, char type) {
  std::string n = name, prefix;
  if (n.size() > 100) {  // ustar: the folders in the prefix, at a '/'.
    const size_t cut = n.rfind('/', 155);
    prefix = n.substr(0, cut);
    n = n.substr(cut + 1);
  }
  Header(n, prefix, data.size(), type);
  Data(data);
  return *this;
}

TarWriter& TarWriter::LongName(const std::string& name) {
  Header("././@LongLink", "", name.size() + 1, 'L');
  Data(name + '\0');
  return *this;
}

TarWriter& TarWriter::Pax(const std::vector<std::string>& records) {
  std::string body;
  for (const std::string& r : records) {
    // "<len> <record>\n", the length counting its own digits.
    const size_t base = r.size() + 2;
    size_t digits = std::to_string(base).size();
    if (std::to_string(base + digits).size() > digits) ++digits;
    body += absl::StrCat(base + digits, " ", r, "\n");
  }
  Header("PaxHeaders/x", "", body.size(), 'x');
  Data(body);
  return *this;
}

std::string TarWriter::Close() const {
  std::string out = bytes_ + std::string(1024, '\0');
  out.resize((out.size() + 10239) / 10240 * 10240, '\0');
  return out;
}

void TarWriter::Reseal(size_t offset) {
  char* h = &bytes_[offset];
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (int i = 0; i < 512; ++i) sum += static_cast<uint8_t>(h[i]);
  std::snprintf(h + 148, 8, "%06o", sum);
  h[155] = ' ';
}

void TarWriter::Header(const std::string& name, const std::string& prefix, uint64_t size,
                       char type) {
  char h[512] = {0};
  std::memcpy(h, name.data(), std::min<size_t>(name.size(), 100));
  std::snprintf(h + 100, 8, "%07o", 0644);
  std::snprintf(h + 108, 8, "%07o", 1000);
  std::snprintf(h + 116, 8, "%07o", 1000);
  std::snprintf(h + 124, 12, "%011llo", static_cast<unsigned long long>(size));
  std::snprintf(h + 136, 12, "%011o", 1700000000);
  h[156] = type;
  std::memcpy(h + 257, "ustar\0" "00", 8);
  std::memcpy(h + 345, prefix.data(), std::min<size_t>(prefix.size(), 155));
  bytes_.append(h, 512);
  Reseal(bytes_.size() - 512);
}

void TarWriter::Data(const std::string& data) {
  bytes_ += data;
  bytes_.resize((bytes_.size() + 511) / 512 * 512, '\0');
}

absl::Status WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> MakeFolderDataset(
    const std::string& root, const FolderSpec& spec) {
  std::vector<std::string> paths;
  Rng rng(MixSeed({spec.seed, 0x464f4c44ULL}));
  for (int c = 0; c < spec.classes; ++c) {
    const std::string dir = absl::StrFormat("%s/class_%02d", root, c);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return absl::InternalError(absl::StrCat(dir, ": ", ec.message()));
    for (int i = 0; i < spec.per_class; ++i) {
      const int span = spec.max_side - spec.min_side + 1;
      const int w = spec.min_side + static_cast<int>(rng.Below(span));
      const int h = spec.min_side + static_cast<int>(rng.Below(span));
      auto jpeg = EncodeJpeg(PhotoLikeRgb(w, h, rng.Next()), w, h, spec.quality);
      if (!jpeg.ok()) return jpeg.status();
      const std::string path = absl::StrFormat("%s/img_%04d.jpg", dir, i);
      if (absl::Status s = WriteFile(path, *jpeg); !s.ok()) return s;
      paths.push_back(path);
      if (spec.progress) {
        spec.progress(static_cast<int>(paths.size()),
                      spec.classes * spec.per_class, jpeg->size());
      }
    }
  }
  return paths;
}

absl::StatusOr<std::vector<std::string>> MakeBadFiles(const std::string& dir,
                                                      uint64_t seed) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  auto good = EncodeJpeg(PhotoLikeRgb(64, 48, seed), 64, 48, 90);
  if (!good.ok()) return good.status();
  Rng rng(seed);
  std::string garbage(4096, '\0');
  for (char& ch : garbage) ch = static_cast<char>(rng.Next());
  const std::vector<std::pair<std::string, std::string>> files = {
      {dir + "/bad_empty.jpg", ""},
      {dir + "/bad_truncated.jpg", good->substr(0, good->size() / 2)},
      {dir + "/bad_garbage.jpg", garbage},
      {dir + "/bad_png.jpg", std::string("\x89PNG\r\n\x1a\n", 8) + garbage},
  };
  std::vector<std::string> paths;
  for (const auto& [path, bytes] : files) {
    if (absl::Status s = WriteFile(path, bytes); !s.ok()) return s;
    paths.push_back(path);
  }
  return paths;
}

namespace {
template <typename T>
void Put(std::string* s, size_t at, T v) {
  std::memcpy(&(*s)[at], &v, sizeof(T));
}
}  // namespace

std::string NiftiBytes(int version, const std::vector<int64_t>& dims, int datatype,
                       const std::string& voxels, double slope, double inter) {
  std::string s;
  if (version == 1) {
    s.assign(352, '\0');
    Put<int32_t>(&s, 0, 348);
    Put<int16_t>(&s, 40, static_cast<int16_t>(dims.size()));
    for (size_t k = 0; k < dims.size(); ++k) Put<int16_t>(&s, 42 + 2 * k, static_cast<int16_t>(dims[k]));
    Put<int16_t>(&s, 70, static_cast<int16_t>(datatype));
    for (int k = 0; k < 8; ++k) Put<float>(&s, 76 + 4 * k, 1.0f);
    Put<float>(&s, 108, 352);
    Put<float>(&s, 112, static_cast<float>(slope));
    Put<float>(&s, 116, static_cast<float>(inter));
    std::memcpy(&s[344], "n+1\0", 4);
  } else {
    s.assign(544, '\0');
    Put<int32_t>(&s, 0, 540);
    std::memcpy(&s[4], "n+2\0\r\n\032\n", 8);
    Put<int16_t>(&s, 12, static_cast<int16_t>(datatype));
    Put<int64_t>(&s, 16, static_cast<int64_t>(dims.size()));
    for (size_t k = 0; k < dims.size(); ++k) Put<int64_t>(&s, 24 + 8 * k, dims[k]);
    for (int k = 0; k < 8; ++k) Put<double>(&s, 104 + 8 * k, 1.0);
    Put<int64_t>(&s, 168, 544);
    Put<double>(&s, 176, slope);
    Put<double>(&s, 184, inter);
  }
  return s + voxels;
}

std::string Gzip(const std::string& plain, int level) {
  libdeflate_compressor* c = libdeflate_alloc_compressor(level);
  std::string out(libdeflate_gzip_compress_bound(c, plain.size()), '\0');
  out.resize(libdeflate_gzip_compress(c, plain.data(), plain.size(), out.data(), out.size()));
  libdeflate_free_compressor(c);
  return out;
}

std::string MakeTempDir(const std::string& tag) {
  std::string tmpl = absl::StrCat("/tmp/stoker-", tag, "-XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) std::abort();
  return tmpl;
}

absl::StatusOr<std::string> EncodePng(const std::vector<uint8_t>& rgb,
                                      int width, int height, PngKind kind) {
  spng_ctx* ctx = spng_ctx_new(SPNG_CTX_ENCODER);
  if (ctx == nullptr) return absl::ResourceExhaustedError("spng_ctx_new");
  spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
  spng_ihdr ihdr{};
  ihdr.width = static_cast<uint32_t>(width);
  ihdr.height = static_cast<uint32_t>(height);
  ihdr.bit_depth = kind == PngKind::kGray16 ? 16 : 8;
  const size_t n = static_cast<size_t>(width) * height;
  std::vector<uint8_t> px;
  switch (kind) {
    case PngKind::kRgb8:
      ihdr.color_type = SPNG_COLOR_TYPE_TRUECOLOR;
      px = rgb;
      break;
    case PngKind::kRgba8:
      ihdr.color_type = SPNG_COLOR_TYPE_TRUECOLOR_ALPHA;
      for (size_t i = 0; i < n; ++i) {
        px.insert(px.end(), {rgb[i * 3], rgb[i * 3 + 1], rgb[i * 3 + 2],
                             static_cast<uint8_t>(i * 7)});
      }
      break;
    case PngKind::kGray8:
      ihdr.color_type = SPNG_COLOR_TYPE_GRAYSCALE;
      for (size_t i = 0; i < n; ++i) px.push_back(rgb[i * 3 + 1]);
      break;
    case PngKind::kGray16:
      ihdr.color_type = SPNG_COLOR_TYPE_GRAYSCALE;
      for (size_t i = 0; i < n; ++i) {  // Big-endian samples.
        px.push_back(rgb[i * 3]);
        px.push_back(rgb[i * 3 + 2]);
      }
      break;
    case PngKind::kPalette8: {
      ihdr.color_type = SPNG_COLOR_TYPE_INDEXED;
      spng_plte plte{};
      plte.n_entries = 256;
      for (int k = 0; k < 256; ++k) {  // 3-3-2 bits of R, G, B.
        plte.entries[k] = spng_plte_entry{static_cast<uint8_t>((k >> 5) * 36),
                                          static_cast<uint8_t>(((k >> 2) & 7) * 36),
                                          static_cast<uint8_t>((k & 3) * 85), 255};
      }
      spng_set_plte(ctx, &plte);
      for (size_t i = 0; i < n; ++i) {
        px.push_back(static_cast<uint8_t>((rgb[i * 3] >> 5) << 5 |
                                          (rgb[i * 3 + 1] >> 5) << 2 |
                                          rgb[i * 3 + 2] >> 6));
      }
      break;
    }
  }
  spng_set_ihdr(ctx, &ihdr);
  int rc = spng_encode_image(ctx, px.data(), px.size(), SPNG_FMT_PNG,
                             SPNG_ENCODE_FINALIZE);
  std::string out;
  if (rc == 0) {
    size_t len = 0;
    void* buf = spng_get_png_buffer(ctx, &len, &rc);
    if (buf != nullptr) {
      out.assign(static_cast<const char*>(buf), len);
      free(buf);
    }
  }
  spng_ctx_free(ctx);
  if (rc != 0) return absl::InternalError(absl::StrCat("spng: ", spng_strerror(rc)));
  return out;
}

}  // namespace stoker::testdata
