#include "server/serve/sample_renderer.h"

#include <cstring>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "server/imaging/decode.h"
#include "server/imaging/jpeg.h"
#include "server/imaging/jpeg_handover.h"
#include "shm/futex.h"
#include "util/status_macros.h"

namespace stoker {

absl::Status WriteEncoded(const FieldPlan& field, const std::string& bytes, uint8_t* out) {
  const uint64_t room = field.shape[0] - 4;
  if (bytes.size() > room)
    return absl::DataLossError(absl::StrCat(
        "is ", bytes.size(), " bytes; field '", field.name, "' holds at most ", room));
  const uint32_t n = static_cast<uint32_t>(bytes.size());
  std::memcpy(out, &n, 4);
  std::memcpy(out + 4, bytes.data(), n);
  return absl::OkStatus();
}

SampleRenderer::SampleRenderer(const Dataset& dataset, const Pipeline& pipeline,
                               const SampleReader& reader, uint64_t seed,
                               std::vector<uint64_t> field_bytes, DecodeLimits limits)
    : dataset_(dataset),
      pipeline_(pipeline),
      reader_(reader),
      seed_(seed),
      field_bytes_(std::move(field_bytes)),
      limits_(limits) {}

absl::Status SampleRenderer::Render(uint64_t index, uint64_t epoch, bool hand_over,
                                    const FetchedSample& in, const SampleOut& out,
                                    uint8_t* spatial_out, RenderCost* cost) const {
  const std::vector<FieldPlan>& fields = pipeline_.fields();
  thread_local ScratchImage image;
  std::vector<Canvas> canvases;
  std::vector<Effects> effects;
  int width = 0, height = 0;
  // The sample's geometry, drawn once from its first picture's size; false
  // for a picture of another size.
  auto plan = [&](int w, int h) {
    if (canvases.empty()) {
      width = w;
      height = h;
      canvases = pipeline_.Plan(w, h, seed_, epoch, index, &effects);
    }
    return w == width && h == height;
  };
  auto other_size = [&](int w, int h) {
    return absl::DataLossError(absl::StrCat(
        "is ", w, "x", h, " but the sample's first picture is ", width, "x",
        height, ": the fields of a sample must be the same size"));
  };
  for (size_t f = 0; f < fields.size(); ++f) {
    const FieldPlan& field = fields[f];
    const std::string& path = dataset_.sample(index).file(field.file);
    auto named = [&](const absl::Status& s) {
      return field.file == 0 ? s : absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
    };
    if (field.kind == v1::FieldSpec::KIND_ENCODED && field.client_of < 0) {
      STOKER_RETURN_IF_ERROR(named(WriteEncoded(field, *in.files[field.file], out.field[f])));
      continue;
    }
    if (!field.spatial()) continue;
    const uint64_t t0 = shm::MonotonicNanos();
    if (field.client_jpeg >= 0 && hand_over) {
      absl::StatusOr<bool> handed = HandOver(f, in, out, plan, canvases, effects);
      if (!handed.ok()) return named(handed.status());
      if (*handed) {
        cost->handed_over = true;
        cost->decode_ns += shm::MonotonicNanos() - t0;  // A header read and a copy.
        continue;
      }
    }
    Bytes entry;
    ImageView view;
    absl::Cleanup done_with = [] { DoneWith(&image); };  // After the field's writes.
    bool same = true;
    absl::Status s = reader_.Picture(
        f, in,
        [&](int w, int h) {
          if (!plan(w, h)) {
            same = false;
            return RegionRequest{8, PixelRect{0, 0, w, h}, false};
          }
          return pipeline_.Region(field, canvases[f], w, h);
        },
        &image, &entry, &view);
    if (s.ok() && !same) s = other_size(view.scaled_width, view.scaled_height);
    if (!s.ok()) return named(s);
    const uint64_t t1 = shm::MonotonicNanos();
    uint8_t* dst = out.field[f];
    if (spatial_out != nullptr) {
      dst = spatial_out;
      spatial_out += field_bytes_[f];
    }
    pipeline_.Write(field, canvases[f], view, width, height, dst, &effects[f]);
    if (field.client_jpeg >= 0) {
      pipeline_.WriteRender(canvases[f], width, height, false, false,
                            out.field[field.client_render]);
      std::memset(out.field[field.client_jpeg], 0, 4);
    }
    cost->decode_ns += t1 - t0;
    cost->write_ns += shm::MonotonicNanos() - t1;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> SampleRenderer::HandOver(size_t f, const FetchedSample& in,
                                              const SampleOut& out,
                                              const std::function<bool(int, int)>& plan,
                                              const std::vector<Canvas>& canvases,
                                              const std::vector<Effects>& effects) const {
  const FieldPlan& field = pipeline_.fields()[f];
  const ClientDecodePlan& cd = pipeline_.client_decode();
  const std::string& bytes = *in.files[field.file];
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  const HandOverRule rule{cd.max_bytes, cd.max_pixels, /*hardware=*/false};
  if (KeptByBytes(data, bytes.size(), rule) != Kept::kHandedOver) return false;
  JpegDecoder& decoder = ThreadLocalDecoder();
  decoder.set_limits(limits_);
  JpegInfo info;
  STOKER_RETURN_IF_ERROR(decoder.ReadInfo(data, bytes.size(), &info));
  if (KeptByHeader(info, rule) != Kept::kHandedOver) return false;
  if (!plan(info.width, info.height)) return false;  // The daemon names the misfit.
  // The client renders geometry and normalization; a sample drawn a
  // per-pixel effect is the daemon's.
  if (!effects[f].empty()) return false;
  pipeline_.WriteRender(canvases[f], info.width, info.height, true, info.progressive,
                        out.field[field.client_render]);
  STOKER_RETURN_IF_ERROR(
      WriteEncoded(pipeline_.fields()[field.client_jpeg], bytes, out.field[field.client_jpeg]));
  return true;
}

}  // namespace stoker
