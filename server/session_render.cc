// ServingSession's decode stage: a sample's pictures (decoded, from the
// pixel cache, or handed to the client as their files) rendered into the
// slot. The rest of the class is in session.cc.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "server/decode.h"
#include "server/jpeg.h"
#include "server/session.h"
#include "shm/futex.h"
#include "util/status_macros.h"

namespace stoker {
namespace {

// Whether the file's last bytes hold the end-of-image marker. A file cut
// short is the daemon's to decode (and to fail, replace or zero as the
// spec says): a client's decoder would fill the missing rows with gray
// without an error.
bool EndsWithEoi(const std::string& bytes) {
  const size_t from = bytes.size() > 64 ? bytes.size() - 64 : 0;
  for (size_t i = bytes.size(); i-- > from + 1;) {
    if (static_cast<uint8_t>(bytes[i - 1]) == 0xFF && static_cast<uint8_t>(bytes[i]) == 0xD9)
      return true;
  }
  return false;
}

}  // namespace

bool ServingSession::LookupPixels(const std::vector<SourceKey>& ids, Fetched* in) {
  const uint64_t t0 = shm::MonotonicNanos();
  const std::vector<FieldPlan>& fields = pipeline_.fields();
  in->pictures.resize(fields.size());
  bool all = true;
  for (size_t f = 0; f < fields.size(); ++f) {
    if (!fields[f].spatial()) continue;
    CachedPicture& pic = in->pictures[f];
    const SourceKey& file = ids[fields[f].file];
    pic.version = file.version;
    pic.key = PixelCache::Key(file, max_side_,
                              pipeline_.Request(fields[f], ctx_.decode_limits));
    pic.entry = ctx_.pixels->Lookup(*dataset_->source, file, pic.key, &pic.versioned);
    all = all && pic.entry != nullptr;
  }
  read_ns_.fetch_add(shm::MonotonicNanos() - t0, std::memory_order_relaxed);
  return all;
}

absl::Status ServingSession::Picture(const FieldPlan& field, size_t f,
                                     const Fetched& in,
                                     const std::function<RegionRequest(int, int)>& plan,
                                     Image* image, Bytes* entry, ImageView* view) {
  const ImageRequest request = pipeline_.Request(field, ctx_.decode_limits);
  if (max_side_ == 0) {
    const Bytes& bytes = in.files[field.file];
    STOKER_RETURN_IF_ERROR(DecodeImage(reinterpret_cast<const uint8_t*>(bytes->data()),
                                       bytes->size(), request, plan, image));
    *view = image->view();
    return absl::OkStatus();
  }
  const CachedPicture& pic = in.pictures[f];
  *entry = pic.entry;
  if (!*entry) {
    STOKER_ASSIGN_OR_RETURN(
        *entry, ctx_.pixels->Fill(pic.key, in.files[field.file], request, max_side_,
                                  field.kind == v1::FieldSpec::KIND_MASK ? Filter::kNearest
                                                                         : Filter::kBilinear,
                                  pic.versioned, pic.version));
  }
  *view = PixelsOf(*entry);
  plan(view->width, view->height);  // The geometry, at the cached size.
  return absl::OkStatus();
}

absl::Status ServingSession::RenderSample(const BatchJob& job,
                                          const SampleTask& t,
                                          const Fetched& in,
                                          uint8_t* spatial_out) {
  const std::vector<FieldPlan>& fields = pipeline_.fields();
  thread_local Image image;
  std::vector<Canvas> canvases;
  std::vector<Effects> effects;
  int width = 0, height = 0;
  // The sample's geometry, drawn once from its first picture's size; false
  // for a picture of another size.
  auto plan = [&](int w, int h) {
    if (canvases.empty()) {
      width = w;
      height = h;
      canvases = pipeline_.Plan(w, h, spec_.seed(), job.epoch, t.index, &effects);
    }
    return w == width && h == height;
  };
  auto other_size = [&](int w, int h) {
    return absl::DataLossError(absl::StrCat(
        "is ", w, "x", h, " but the sample's first picture is ", width, "x",
        height, ": the fields of a sample must be the same size"));
  };
  bool handed_over = false;
  uint64_t decode_ns = 0, write_ns = 0;
  for (size_t f = 0; f < fields.size(); ++f) {
    const FieldPlan& field = fields[f];
    const std::string& path = dataset_->samples[t.index].file(field.file);
    auto named = [&](const absl::Status& s) {
      return field.file == 0 ? s : absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
    };
    if (field.kind == v1::FieldSpec::KIND_ENCODED && field.client_of < 0) {
      STOKER_RETURN_IF_ERROR(named(WriteEncoded(field, *in.files[field.file],
                                                SampleOut(job, f, t.i))));
      continue;
    }
    if (!field.spatial()) continue;
    const uint64_t t0 = shm::MonotonicNanos();
    if (field.client_jpeg >= 0 && t.i >= job.cpu_samples) {
      absl::StatusOr<bool> handed = HandOver(job, t, f, in, plan, canvases, effects);
      if (!handed.ok()) return named(handed.status());
      if (*handed) {
        handed_over = true;
        decode_ns += shm::MonotonicNanos() - t0;  // A header read and a copy.
        continue;
      }
    }
    Bytes entry;
    ImageView view;
    bool same = true;
    absl::Status s = Picture(
        field, f, in,
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
    uint8_t* out = SampleOut(job, f, t.i);
    if (spatial_out != nullptr) {
      out = spatial_out;
      spatial_out += ring_->layout().fields[f].sample_bytes;
    }
    pipeline_.Write(field, canvases[f], view, width, height, out, &effects[f]);
    if (field.client_jpeg >= 0) {
      pipeline_.WriteRender(canvases[f], width, height, false, false,
                            SampleOut(job, field.client_render, t.i));
      std::memset(SampleOut(job, field.client_jpeg, t.i), 0, 4);
    }
    decode_ns += t1 - t0;
    write_ns += shm::MonotonicNanos() - t1;
  }
  ctx_.counters->decode.Observe(decode_ns);
  ctx_.counters->transform.Observe(write_ns);
  work_ns_.fetch_add(decode_ns + write_ns, std::memory_order_relaxed);
  if (handed_over) {
    client_decoded_.fetch_add(1, std::memory_order_relaxed);
  } else if (pipeline_.client_decode().on) {  // The daemon's rate.
    ring_->AddDecodeCost(1, decode_ns + write_ns);
  }
  return absl::OkStatus();
}

absl::Status ServingSession::WriteEncoded(const FieldPlan& field,
                                          const std::string& bytes,
                                          uint8_t* out) const {
  const uint64_t room = field.shape[0] - 4;
  if (bytes.size() > room)
    return absl::DataLossError(absl::StrCat(
        "is ", bytes.size(), " bytes; field '", field.name, "' holds at most ", room));
  const uint32_t n = static_cast<uint32_t>(bytes.size());
  std::memcpy(out, &n, 4);
  std::memcpy(out + 4, bytes.data(), n);
  return absl::OkStatus();
}

absl::StatusOr<bool> ServingSession::HandOver(const BatchJob& job, const SampleTask& t,
                                              size_t f, const Fetched& in,
                                              const std::function<bool(int, int)>& plan,
                                              const std::vector<Canvas>& canvases,
                                              const std::vector<Effects>& effects) {
  const FieldPlan& field = pipeline_.fields()[f];
  const ClientDecodePlan& cd = pipeline_.client_decode();
  const std::string& bytes = *in.files[field.file];
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  if (bytes.size() > cd.max_bytes ||
      SniffImageFormat(data, bytes.size()) != ImageFormat::kJpeg || !EndsWithEoi(bytes))
    return false;
  JpegDecoder& decoder = ThreadLocalDecoder();
  decoder.set_limits(ctx_.decode_limits);
  JpegInfo info;
  STOKER_RETURN_IF_ERROR(decoder.ReadInfo(data, bytes.size(), &info));
  if (info.cmyk || uint64_t(info.width) * info.height > cd.max_pixels) return false;
  if (!plan(info.width, info.height)) return false;  // The daemon names the misfit.
  // The client renders geometry and normalization; a sample drawn a
  // per-pixel effect is the daemon's.
  if (!effects[f].empty()) return false;
  pipeline_.WriteRender(canvases[f], info.width, info.height, true, info.progressive,
                        SampleOut(job, field.client_render, t.i));
  STOKER_RETURN_IF_ERROR(WriteEncoded(pipeline_.fields()[field.client_jpeg], bytes,
                                      SampleOut(job, field.client_jpeg, t.i)));
  return true;
}

}  // namespace stoker
