// Test helpers for op units: a pipeline compiled from a spec's JSON, and
// one sample's per-pixel stage run over given pixels. Tests only.
#ifndef STOKER_SERVER_PIPELINE_OP_TESTING_H_
#define STOKER_SERVER_PIPELINE_OP_TESTING_H_

#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "server/pipeline/pipeline.h"
#include "util/proto_json.h"

namespace stoker {

inline absl::StatusOr<Pipeline> CompileJson(const std::string& json) {
  v1::SessionSpec spec;
  absl::Status s = JsonToProto(json, &spec);
  if (!s.ok()) return s;
  return Pipeline::Compile(spec);
}

// A spec of one uint8 image field height x width x channels, center-cropped
// to its own size (an identity), then `op` (an Op's JSON members, e.g.
// R"("color_jitter": {...})").
inline std::string ImageOpSpec(int height, int width, int channels, const std::string& op) {
  const std::string h = std::to_string(height), w = std::to_string(width);
  return R"({"fields": [{"name": "image", "kind": "KIND_IMAGE", "shape": [)" + h + ", " + w +
         ", " + std::to_string(channels) + R"(]}], "pipeline": [{"center_crop": {"width": )" + w +
         R"(, "height": )" + h + "}}, {" + op + "}]}";
}

// Image field `f`'s effects for sample (seed, epoch, index) of a source
// picture the field's size.
inline Effects EffectsOf(const Pipeline& p, int f, uint64_t seed, uint64_t epoch,
                         uint64_t index) {
  std::vector<Effects> effects;
  const FieldPlan& field = p.fields()[f];
  p.Plan(field.width, field.height, seed, epoch, index, &effects);
  return effects[f];
}

// Runs image field `f`'s per-pixel stage for that sample over `hwc`.
inline std::vector<uint8_t> RunPixels(const Pipeline& p, int f, std::vector<uint8_t> hwc,
                                      uint64_t seed, uint64_t epoch, uint64_t index) {
  for (const Effect& e : EffectsOf(p, f, seed, epoch, index)) {
    e.kind->ApplyPixels(e, p.fields()[f], hwc.data());
  }
  return hwc;
}

// Image field `f` (uint8) of the sample (seed, epoch, index) of a whole
// picture `hwc`, width x height x channels: its canvas and effects drawn
// and written as the decode stage writes them.
inline std::vector<uint8_t> Render(const Pipeline& p, int f, const std::vector<uint8_t>& hwc,
                                   int width, int height, int channels, uint64_t seed,
                                   uint64_t epoch, uint64_t index) {
  std::vector<Effects> effects;
  const std::vector<Canvas> canvases = p.Plan(width, height, seed, epoch, index, &effects);
  ImageView view;
  view.pixels = hwc.data();
  view.width = view.scaled_width = width;
  view.height = view.scaled_height = height;
  view.channels = channels;
  const FieldPlan& field = p.fields()[f];
  std::vector<uint8_t> out(static_cast<size_t>(field.width) * field.height * field.channels);
  p.Write(field, canvases[f], view, width, height, out.data(), &effects[f]);
  return out;
}

// A picture whose pixel (x, y) is (x, y, x + y): where an output pixel
// came from can be read off it (width and height below 256).
inline std::vector<uint8_t> Coordinates(int width, int height) {
  std::vector<uint8_t> px(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &px[(static_cast<size_t>(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>(x);
      p[1] = static_cast<uint8_t>(y);
      p[2] = static_cast<uint8_t>(x + y);
    }
  }
  return px;
}

// Runs array field `f`'s value stage (float fields: T is float) and then
// its per-pixel stage for that sample over `values` (the field's elements,
// as written), for a sample the field's shape, as the reader does.
template <typename T>
std::vector<T> RunArray(const Pipeline& p, int f, std::vector<T> values, uint64_t seed,
                        uint64_t epoch, uint64_t index) {
  std::vector<Effects> effects;
  p.PlanArrays(p.fields()[f].shape, seed, epoch, index, &effects);
  for (const Effect& e : effects[f]) {
    if (!e.kind->values()) continue;
    if constexpr (std::is_same_v<T, float>) {
      e.kind->ApplyValues(e, p.fields()[f], values.data(), values.size());
    }
  }
  Pipeline::ApplyArray(p.fields()[f], effects[f], reinterpret_cast<uint8_t*>(values.data()));
  return values;
}

// Structure plus noise: smooth gradients and a disc, with noise (pixels
// that neither saturate nor repeat, as photographs).
inline std::vector<uint8_t> PhotoLike(int w, int h, int c, uint64_t seed) {
  std::vector<uint8_t> px(static_cast<size_t>(w) * h * c);
  Rng rng(seed);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const bool disc = (x - w / 2) * (x - w / 2) + (y - h / 3) * (y - h / 3) < w * h / 12;
      for (int k = 0; k < c; ++k) {
        double v = 40 + 150.0 * (k == 0 ? x : k == 1 ? y : x + y) / (w + h) +
                   (disc ? 50 * (k - 1) : 0) + static_cast<double>(rng.Below(21)) - 10;
        px[(static_cast<size_t>(y) * w + x) * c + k] =
            static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
      }
    }
  }
  return px;
}

}  // namespace stoker

#endif  // STOKER_SERVER_PIPELINE_OP_TESTING_H_
