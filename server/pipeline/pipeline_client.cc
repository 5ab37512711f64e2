// The client-decode parts of a Pipeline (SessionSpec.client_decode): the
// ring fields the client reads and the render record of a sample.
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "proto/spec_util.h"
#include "server/pipeline/pipeline.h"

namespace stoker {

using v1::FieldSpec;

absl::Status Pipeline::AddClientFields(const v1::ClientDecode& c) {
  auto bad = [](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("client_decode: ", why));
  };
  // In range and complete: CheckSessionSpec's CheckRanges, and Compile's
  // defaults.
  client_.on = true;
  client_.share = static_cast<uint32_t>(std::lround(c.cpu_share() * shm::kShareOne));
  client_.max_bytes = c.max_bytes();
  client_.max_pixels = c.max_pixels();
  const size_t declared = fields_.size();
  for (size_t i = 0; i < declared; ++i) {
    if (fields_[i].kind != FieldSpec::KIND_IMAGE) continue;
    if (fields_[i].channels == 4) continue;  // RGBA: the daemon's.
    const std::string name = fields_[i].name;
    if (name.size() + 7 > 31)
      return bad(absl::StrCat("field '", name, "': its ring fields '", name,
                              "_render' and '", name, "_jpeg' need a name of at most 24 characters"));
    for (const char* suffix : {"_jpeg", "_render"}) {
      for (const FieldPlan& f : fields_) {
        if (f.name == name + suffix)
          return bad(absl::StrCat("field '", f.name, "' is taken: it names image field '",
                                  name, "''s ", suffix + 1, " field"));
      }
    }
    FieldPlan jpeg;
    jpeg.name = name + "_jpeg";
    jpeg.kind = FieldSpec::KIND_ENCODED;
    jpeg.dtype = shm::kDTypeUint8;
    jpeg.shape = {uint64_t{client_.max_bytes} + 4};
    jpeg.file = fields_[i].file;
    jpeg.client_of = static_cast<int>(i);
    FieldPlan render;
    render.client_of = static_cast<int>(i);
    render.name = name + "_render";
    render.dtype = shm::kDTypeFloat32;
    render.shape = {kRenderFloats};
    fields_[i].client_jpeg = static_cast<int>(fields_.size());
    fields_.push_back(std::move(jpeg));
    fields_[i].client_render = static_cast<int>(fields_.size());
    fields_.push_back(std::move(render));
  }
  if (fields_.size() == declared)
    return bad("no image field of 1 or 3 channels to decode in the client");
  has_encoded_ = true;
  fingerprint_ += absl::StrCat("|client", client_.max_bytes, ",", client_.max_pixels);
  return absl::OkStatus();
}

std::vector<v1::ClientDecodeField> Pipeline::ClientFields() const {
  std::vector<v1::ClientDecodeField> out;
  for (const FieldPlan& f : fields_) {
    if (f.client_jpeg < 0) continue;
    v1::ClientDecodeField& c = out.emplace_back();
    c.set_field(f.name);
    c.set_encoded(fields_[f.client_jpeg].name);
    c.set_render(fields_[f.client_render].name);
    c.set_channels(f.channels);
    c.set_dtype(ProtoDType(f.dtype));
    c.set_chw(f.chw);
    for (int k = 0; k < f.channels; ++k) {
      c.add_scale(f.norm.scale[k]);
      c.add_offset(f.norm.offset[k]);
    }
#define STOKER_SLOT(slot, name) c.add_record(name);
    STOKER_RENDER_SLOTS(STOKER_SLOT)
#undef STOKER_SLOT
  }
  return out;
}

void Pipeline::WriteRender(const Canvas& canvas, int source_w, int source_h,
                           bool client, bool progressive, uint8_t* out) const {
  const RenderPlan rp = PlanRender(canvas, source_w, source_h);
  const v1::Interpolation filter = canvas.filter == Filter::kBicubic  ? v1::INTERPOLATION_BICUBIC
                                   : canvas.filter == Filter::kNearest ? v1::INTERPOLATION_NEAREST
                                                                       : v1::INTERPOLATION_BILINEAR;
  float r[kRenderFloats];
  r[kWhere] = client ? 1.0f : 0.0f;
  r[kSourceWidth] = float(source_w);
  r[kSourceHeight] = float(source_h);
  r[kX0] = float(rp.x0);
  r[kY0] = float(rp.y0);
  r[kX1] = float(rp.x1);
  r[kY1] = float(rp.y1);
  r[kBoxX] = float(rp.box.x);
  r[kBoxY] = float(rp.box.y);
  r[kBoxW] = float(rp.box.w);
  r[kBoxH] = float(rp.box.h);
  r[kHFlip] = rp.box.flip ? 1.0f : 0.0f;
  r[kVFlip] = canvas.vflip ? 1.0f : 0.0f;
  r[kFill] = float(canvas.fill);
  r[kFilter] = float(filter);
  r[kProgressive] = progressive ? 1.0f : 0.0f;
  std::memcpy(out, r, sizeof(r));
}

}  // namespace stoker
