// fuzz_decode: runs mutated real-photo JPEGs through the daemon's decode
// path (header limits, DCT-scaled region decode, crop, resample) and
// counts the outcomes. Built with AddressSanitizer and UBSan by
// `make sanitize` (CI), where any memory error or undefined behaviour
// aborts with a report; without them it is a plain robustness run.
//
//   fuzz_decode --photos DIR [--mutations N] [--seed S] [--side PX]
//
// The photos (e.g. /usr/share/backgrounds/mate/nature, Debian's
// mate-backgrounds) are first reduced to about --side pixels and
// re-encoded baseline 4:2:0, 4:4:4, grayscale and progressive, and as PNG
// (RGB, gray, RGBA, palette, 16-bit gray), so the mutations stay fast to
// decode; the content stays photographic. JPEGs go through the fast path of
// the presets; PNGs through the by-content decoder and a custom pipeline
// (an image and a mask of the same file, joint random geometry).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "server/array_source.h"
#include "server/decode.h"
#include "server/jpeg.h"
#include "server/pipeline.h"
#include "server/transform.h"
#include "util/proto_json.h"
#include "tests/testdata.h"
#include "util/rng.h"

ABSL_FLAG(std::string, photos, "/usr/share/backgrounds/mate/nature",
          "Folder of real-photo JPEGs to mutate.");
ABSL_FLAG(int, mutations, 3000, "Mutated files to decode.");
ABSL_FLAG(uint64_t, seed, 1, "Mutation seed.");
ABSL_FLAG(int, side, 320, "Longest side the photos are reduced to first.");

namespace stoker {
namespace {

using Bytes = std::string;

// A reduced copy of `jpeg`, re-encoded four ways.
std::vector<Bytes> Variants(const Bytes& jpeg, int side) {
  JpegDecoder d;
  RgbImage full;
  if (!d.Decode(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), &full)
           .ok()) {
    return {};
  }
  const double k = static_cast<double>(side) / std::max(full.width, full.height);
  const int w = std::max(16, static_cast<int>(full.width * k));
  const int h = std::max(16, static_cast<int>(full.height * k));
  std::vector<uint8_t> small(static_cast<size_t>(w) * h * 3);
  ResizeBox(full.pixels.data(), full.width, full.height,
            CropBox{0, 0, static_cast<double>(full.width),
                    static_cast<double>(full.height), false},
            w, h, small.data());
  std::vector<Bytes> out;
  using testdata::Subsampling;
  for (auto [sub, progressive] :
       {std::pair{Subsampling::k420, false}, std::pair{Subsampling::k444, false},
        std::pair{Subsampling::kGray, false}, std::pair{Subsampling::k420, true}}) {
    auto enc = testdata::EncodeJpeg(small, w, h, 85, sub, progressive);
    if (enc.ok()) out.push_back(*enc);
  }
  using testdata::PngKind;
  for (PngKind kind : {PngKind::kRgb8, PngKind::kGray8, PngKind::kRgba8,
                       PngKind::kPalette8, PngKind::kGray16}) {
    auto enc = testdata::EncodePng(small, w, h, kind);
    if (enc.ok()) out.push_back(*enc);
  }
  return out;
}

// Decodes a (mutated) PNG as an image and a mask field with random joint
// geometry, as a session would.
absl::Status RunPipeline(const Pipeline& p, const Bytes& bytes, uint64_t index) {
  std::vector<Canvas> canvases;
  int width = 0, height = 0;
  Image image;
  for (size_t f = 0; f < p.fields().size(); ++f) {
    const FieldPlan& field = p.fields()[f];
    absl::Status s = DecodeImage(
        reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
        p.Request(field, DecodeLimits()),
        [&](int w, int h) {
          if (canvases.empty()) {
            width = w;
            height = h;
            canvases = p.Plan(w, h, 1, 0, index);
          }
          return p.Region(field, canvases[f], w, h);
        },
        &image);
    if (!s.ok()) return s;
    std::vector<uint8_t> out(field.height * field.width * field.channels);
    p.Write(field, canvases[f], image, width, height, out.data());
  }
  return absl::OkStatus();
}

// One mutation of `in`, chosen by `rng`; its kind is named in `kind`.
Bytes Mutate(const Bytes& in, Rng& rng, std::string* kind) {
  Bytes b = in;
  const size_t n = b.size();
  auto at = [&](size_t lo) { return lo + rng.Next() % (n - lo); };
  switch (rng.Next() % 7) {
    case 0: {  // Flip bits anywhere.
      *kind = "bitflips";
      for (int k = 1 + rng.Next() % 8; k > 0; --k) b[at(2)] ^= 1 << (rng.Next() % 8);
      break;
    }
    case 1: {  // Overwrite header bytes (first 1 KiB: tables, frame, scan).
      *kind = "header";
      for (int k = 1 + rng.Next() % 4; k > 0; --k) {
        b[2 + rng.Next() % std::min<size_t>(n - 2, 1024)] =
            static_cast<char>(rng.Next());
      }
      break;
    }
    case 2:  // Truncate.
      *kind = "truncate";
      b.resize(at(2));
      break;
    case 3: {  // Claim a huge or odd size in the frame header.
      *kind = "size";
      for (size_t i = 2; i + 8 < n; ++i) {
        const uint8_t m = static_cast<uint8_t>(b[i + 1]);
        if (static_cast<uint8_t>(b[i]) == 0xFF && (m == 0xC0 || m == 0xC2)) {
          const uint16_t v[] = {0, 1, 7, 16384, 65535};
          const uint16_t hh = v[rng.Next() % 5], ww = v[rng.Next() % 5];
          b[i + 5] = static_cast<char>(hh >> 8);
          b[i + 6] = static_cast<char>(hh);
          b[i + 7] = static_cast<char>(ww >> 8);
          b[i + 8] = static_cast<char>(ww);
          break;
        }
      }
      break;
    }
    case 4: {  // Duplicate a stretch (repeated segments and scans).
      *kind = "duplicate";
      const size_t from = at(2), len = std::min<size_t>(n - from, 1 + rng.Next() % 4096);
      const Bytes piece = b.substr(from, len);
      for (int k = 1 + rng.Next() % 20; k > 0; --k) b.insert(from, piece);
      break;
    }
    case 5: {  // Insert random bytes.
      *kind = "insert";
      Bytes junk(1 + rng.Next() % 64, '\0');
      for (char& c : junk) c = static_cast<char>(rng.Next());
      b.insert(at(2), junk);
      break;
    }
    default: {  // Turn a marker into another one (e.g. DQT into APPn).
      *kind = "marker";
      for (int tries = 0; tries < 64; ++tries) {
        const size_t i = at(2);
        if (static_cast<uint8_t>(b[i - 1]) == 0xFF && static_cast<uint8_t>(b[i]) >= 0xC0) {
          b[i] = static_cast<char>(0xC0 + rng.Next() % 0x3F);
          break;
        }
      }
      break;
    }
  }
  return b;
}

// A mutated .npy of the photo's pixels: header parse, then a region read
// of what the header claims (the parse must have bounded it by the data).
absl::Status RunNpy(const Bytes& bytes, Rng& rng) {
  absl::StatusOr<NpyHeader> h =
      ParseNpyHeader(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!h.ok()) return h.status();
  std::vector<uint64_t> start(h->shape.size()), count(h->shape.size());
  uint64_t n = 1;
  for (size_t d = 0; d < h->shape.size(); ++d) {
    if (h->shape[d] == 0) return absl::OkStatus();
    start[d] = rng.Below(h->shape[d]);
    count[d] = 1 + rng.Below(std::min<uint64_t>(h->shape[d] - start[d], 64));
    n *= count[d];
  }
  std::vector<uint8_t> out(n * 4);
  CopyRegion(reinterpret_cast<const uint8_t*>(bytes.data()) + h->data_offset,
             h->type, h->shape, start.data(), count.data(), out.data(),
             ElemType::kFloat32);
  return absl::OkStatus();
}

int Run() {
  std::vector<Bytes> bases, npys;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(absl::GetFlag(FLAGS_photos), ec)) {
    const std::string ext = e.path().extension().string();
    if (ext != ".jpg" && ext != ".jpeg" && ext != ".JPG") continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    for (Bytes& v : Variants(ss.str(), absl::GetFlag(FLAGS_side))) bases.push_back(v);
    // The photo's pixels as .npy arrays (uint8 HWC and float32).
    JpegDecoder d;
    RgbImage px;
    const std::string jpeg = ss.str();
    if (d.Decode(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), &px).ok()) {
      const std::vector<uint64_t> shape{static_cast<uint64_t>(px.height),
                                        static_cast<uint64_t>(px.width), 3};
      npys.push_back(NpyBytes(ElemType::kUint8, shape, px.pixels.data()));
      std::vector<float> f(px.pixels.begin(), px.pixels.begin() + 3 * px.width * 16);
      npys.push_back(NpyBytes(ElemType::kFloat32, {16, static_cast<uint64_t>(px.width), 3},
                              f.data()));
    }
  }
  if (bases.empty()) {
    std::fprintf(stderr, "fuzz_decode: no JPEG photos in %s\n",
                 absl::GetFlag(FLAGS_photos).c_str());
    return 2;
  }
  v1::SessionSpec spec;
  absl::Status parsed = JsonToProto(R"({"fields": [
      {"name": "image", "kind": "image", "shape": [40, 48, 3]},
      {"name": "mask", "kind": "mask", "shape": [40, 48]}], "pipeline": [
      {"random_resized_crop": {"width": 56, "height": 44, "interpolation": "bicubic"}},
      {"flip": {}}, {"random_crop": {"width": 48, "height": 40}}]})", &spec);
  absl::StatusOr<Pipeline> png_pipeline = Pipeline::Compile(spec);
  if (!parsed.ok() || !png_pipeline.ok()) {
    std::fprintf(stderr, "fuzz_decode: bad pipeline: %s\n",
                 png_pipeline.status().ToString().c_str());
    return 2;
  }
  Rng rng(absl::GetFlag(FLAGS_seed));
  JpegDecoder decoder;  // One decoder for all: no state may carry over.
  std::map<std::string, int> outcomes;
  const int total = absl::GetFlag(FLAGS_mutations);
  for (int m = 0; m < total; ++m) {
    std::string kind;
    if (m % 8 == 7 && !npys.empty()) {  // One in eight: a .npy.
      const Bytes bad = Mutate(npys[rng.Next() % npys.size()], rng, &kind);
      absl::Status s = RunNpy(bad, rng);
      ++outcomes[absl::StrCat("npy ", kind, " ", absl::StatusCodeToString(s.code()))];
      continue;
    }
    const Bytes& base = bases[rng.Next() % bases.size()];
    const Bytes bad = Mutate(base, rng, &kind);
    if (SniffImageFormat(reinterpret_cast<const uint8_t*>(base.data()),
                         base.size()) == ImageFormat::kPng) {
      absl::Status s = RunPipeline(*png_pipeline, bad, m);
      ++outcomes[absl::StrCat("png ", kind, " ", absl::StatusCodeToString(s.code()))];
      continue;
    }
    const bool train = m % 2 == 0;
    const int size = train ? 64 : 96;
    DecodedRegion region;
    CropBox box;
    Rng crop_rng(m);
    absl::Status s = DecodeForCrop(
        decoder, reinterpret_cast<const uint8_t*>(bad.data()), bad.size(),
        [&](int w, int h) {
          return train ? RandomResizedCropBox(w, h, crop_rng) : CenterCropBox(w, h, size);
        },
        size, /*scale=*/m % 3 != 0, /*crop=*/m % 5 != 0, &region, &box);
    if (s.ok()) {
      std::vector<uint8_t> out(static_cast<size_t>(size) * size * 3);
      ResizeBox(region.image.pixels.data(), region.image.width,
                region.image.height, box, size, size, out.data());
    }
    ++outcomes[absl::StrCat(kind, " ", absl::StatusCodeToString(s.code()))];
  }
  std::printf("fuzz_decode: %d mutations of %zu photo encodings\n", total,
              bases.size());
  for (const auto& [what, count] : outcomes) {
    std::printf("  %-32s %d\n", what.c_str(), count);
  }
  return 0;
}

}  // namespace
}  // namespace stoker

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return stoker::Run();
}
