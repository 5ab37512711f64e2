#include "server/pipeline/pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "proto/schema.h"
#include "proto/spec_util.h"
#include "util/cache_key.h"
#include "util/rng.h"

namespace stoker {
namespace {

using v1::FieldSpec;

// The presets as the fields and ops they stand for.
void PresetOps(const v1::SessionSpec& spec, std::vector<FieldSpec>* fields,
               std::vector<v1::Op>* ops) {
  const uint32_t s = spec.image_size();
  const bool fl = spec.dtype() != v1::DTYPE_UINT8;
  FieldSpec image;
  image.set_name("image");
  image.set_kind(FieldSpec::KIND_IMAGE);
  image.set_dtype(spec.dtype());
  image.set_chw(fl);
  for (uint32_t d : fl ? std::vector<uint32_t>{3, s, s} : std::vector<uint32_t>{s, s, 3}) {
    image.add_shape(d);
  }
  FieldSpec label;
  label.set_name("label");
  label.set_kind(FieldSpec::KIND_LABEL);
  label.set_dtype(v1::DTYPE_INT32);
  *fields = {image, label};
  ops->clear();
  if (spec.transform() == v1::TRANSFORM_TRAIN) {
    v1::Op& rrc = ops->emplace_back();
    rrc.mutable_random_resized_crop()->set_width(s);
    rrc.mutable_random_resized_crop()->set_height(s);
    ops->emplace_back().mutable_flip();  // The schema's probability.
  } else {
    v1::Op& resize = ops->emplace_back();
    resize.mutable_resize()->set_mode(v1::ResizeOp::MODE_SHORTER);
    resize.mutable_resize()->set_size(
        static_cast<uint32_t>(std::lround(s * 256.0 / 224.0)));
    v1::Op& crop = ops->emplace_back();
    crop.mutable_center_crop()->set_width(s);
    crop.mutable_center_crop()->set_height(s);
  }
  if (fl) {
    v1::NormalizeOp* n = ops->emplace_back().mutable_normalize();
    *n->mutable_mean() = spec.mean();
    *n->mutable_std() = spec.std();
  }
}

absl::Status CheckField(const FieldSpec& fs, FieldPlan* f) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "field '", fs.name(), "' (", KindName(fs.kind()), "): ", why));
  };
  f->name = fs.name();
  f->kind = fs.kind();
  f->dtype = RingDType(fs.dtype());
  f->file = fs.file();
  f->pad = fs.pad_value();
  f->chw = fs.chw();
  for (uint32_t d : fs.shape()) f->shape.push_back(d);
  const std::string dtype = DTypeName(RingDType(fs.dtype()));
  const std::string shape = absl::StrCat("[", absl::StrJoin(fs.shape(), ", "), "]");
  switch (fs.kind()) {
    case FieldSpec::KIND_IMAGE: {
      if (!ImageDTypeOk(fs.dtype()))
        return bad(absl::StrCat("dtype ", dtype, " not allowed; images are ",
                                ImageDTypeNames()));
      if (fs.shape_size() != 3)
        return bad(absl::StrCat("shape ", shape, " must be [H, W, C]",
                                " (or [C, H, W] with chw)"));
      const int c = static_cast<int>(fs.chw() ? fs.shape(0) : fs.shape(2));
      if (c != 1 && c != 3 && c != 4)
        return bad(absl::StrCat("shape ", shape, ": ", c,
                                " channels; images have 1, 3 or 4"));
      f->channels = c;
      f->height = static_cast<int>(fs.chw() ? fs.shape(1) : fs.shape(0));
      f->width = static_cast<int>(fs.chw() ? fs.shape(2) : fs.shape(1));
      if (f->is_float()) {
        for (float& k : f->norm.scale) k = 1.0f / 255.0f;
      }
      break;
    }
    case FieldSpec::KIND_MASK:
      if (fs.dtype() != v1::DTYPE_UINT8 && fs.dtype() != v1::DTYPE_UINT16)
        return bad(absl::StrCat("dtype ", dtype,
                                " not allowed; masks are uint8 or uint16"));
      if (fs.chw()) return bad("chw applies to images only");
      if (!(fs.shape_size() == 2 || (fs.shape_size() == 3 && fs.shape(2) == 1)))
        return bad(absl::StrCat("shape ", shape, " must be [H, W] or [H, W, 1]"));
      f->channels = 1;
      f->height = static_cast<int>(fs.shape(0));
      f->width = static_cast<int>(fs.shape(1));
      break;
    case FieldSpec::KIND_LABEL:
      if (fs.dtype() != v1::DTYPE_INT32 && fs.dtype() != v1::DTYPE_INT64)
        return bad(absl::StrCat("dtype ", dtype,
                                " not allowed; labels are int32 or int64"));
      if (fs.shape_size() != 0)
        return bad(absl::StrCat("shape ", shape, " must be [] (a scalar)"));
      break;
    case FieldSpec::KIND_ARRAY:
      if (fs.chw()) return bad("chw applies to images only");
      if (fs.shape_size() > static_cast<int>(shm::kMaxFieldDims))
        return bad(absl::StrCat("shape ", shape, ": at most ", shm::kMaxFieldDims, " dimensions"));
      break;
    case FieldSpec::KIND_ENCODED:
      if (fs.dtype() != v1::DTYPE_UINT8)
        return bad(absl::StrCat("dtype ", dtype, " not allowed; encoded fields are uint8"));
      if (fs.chw()) return bad("chw applies to images only");
      if (fs.shape_size() != 1 || fs.shape(0) < 5 || fs.shape(0) > (64u << 20) + 4)
        return bad(absl::StrCat("shape ", shape, " must be [N], N in 5..", (64u << 20) + 4,
                                " (a 4-byte count, then the bytes)"));
      break;
    default:
      return bad("kind must be one of image, mask, label, array, encoded");
  }
  if (!fs.member().empty()) {
    f->member = fs.member();
    if (fs.kind() != FieldSpec::KIND_ENCODED)
      return bad("member applies to encoded fields (the member's bytes as stored)");
    if (fs.file() != 0) return bad("member and file exclude each other");
    if (!IsMemberName(fs.member()))
      return bad(absl::StrCat("member '", absl::CHexEscape(fs.member().substr(0, 40)),
                              "' must be at most 32 of a-z 0-9 . _ - (as \"txt\")"));
  }
  f->text = fs.text();
  if (fs.text() && fs.kind() != FieldSpec::KIND_ENCODED)
    return bad("text applies to encoded fields (the file's bytes as stored)");
  if (fs.text() && !fs.member().empty())
    return bad("text and member exclude each other (a member's field is its shard's; "
               "text reads a manifest's file)");
  if (f->spatial() && (f->height <= 0 || f->width <= 0 ||
                       f->height > static_cast<int>(kMaxSide) ||
                       f->width > static_cast<int>(kMaxSide)))
    return bad(absl::StrCat("shape ", shape, ": height and width must be in 1..", kMaxSide));
  return absl::OkStatus();
}

// What an op applies to, as its error messages say it ("{float}": the
// table's float dtypes).
std::string FitsText(const OpKind& kind) {
  return absl::StrReplaceAll(kind.fits(), {{"{float}", FloatDTypeNames()}});
}

// Converts rendered packed uint8 pixels into the field's dtype and layout.
void Convert(const FieldPlan& f, const uint8_t* hwc, uint8_t* out) {
  const size_t plane = static_cast<size_t>(f.height) * f.width;
  const int c = f.channels;
  if (f.dtype == shm::kDTypeUint8) {  // chw: a transpose.
    for (int k = 0; k < c; ++k) {
      for (size_t i = 0; i < plane; ++i) out[k * plane + i] = hwc[i * c + k];
    }
    return;
  }
  WriteNormalized(hwc, plane, c, f.norm, f.chw, shm::FromRingDType(f.dtype), out);
}

}  // namespace

namespace {

// `m` as the fingerprint sees it: known fields only (a client's unknown
// fields change nothing the daemon does), serialized deterministically.
std::string CanonicalBytes(const google::protobuf::Message& m) {
  std::unique_ptr<google::protobuf::Message> known(m.New());
  known->CopyFrom(m);
  known->DiscardUnknownFields();
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    known->SerializeToCodedStream(&coded);
  }
  return out;
}

}  // namespace

absl::StatusOr<Pipeline> Pipeline::Compile(const v1::SessionSpec& given) {
  // What an unset setting means is the schema's (a checked spec has them
  // all already).
  v1::SessionSpec spec = given;
  if (absl::Status s = ApplySessionDefaults(&spec); !s.ok()) return s;
  if (spec.fields_size() == 0) {
    if (spec.pipeline_size() > 0)
      return absl::InvalidArgumentError("pipeline needs fields: declare the "
                                        "batch's fields it produces");
    std::vector<FieldSpec> fields;
    std::vector<v1::Op> ops;
    PresetOps(spec, &fields, &ops);
    return Build(spec, fields, ops);
  }
  if (spec.transform() != v1::TRANSFORM_UNSPECIFIED || spec.has_image_size() ||
      spec.dtype() != v1::DTYPE_UINT8 || spec.mean_size() || spec.std_size())
    return absl::InvalidArgumentError(
        "fields/pipeline replace the preset: leave transform, image_size, "
        "dtype, mean and std unset (use a normalize op and the fields' dtype)");
  return Build(spec, {spec.fields().begin(), spec.fields().end()},
               {spec.pipeline().begin(), spec.pipeline().end()});
}

absl::Status Pipeline::BindFiles(uint32_t files_per_sample,
                                  const std::vector<std::string>& members,
                                  const std::string& what) {
  for (FieldPlan& f : fields_) {
    if (f.text && !members.empty())
      return absl::InvalidArgumentError(absl::StrCat(
          "field '", f.name, "' is text read from file ", f.file, " of each sample, but the "
          "samples of ", what, " are shards' members: a shard's text is a member field "
          "(member \"txt\")"));
    if (f.member.empty()) continue;
    const auto it = std::find(members.begin(), members.end(), f.member);
    if (it == members.end())
      return absl::InvalidArgumentError(absl::StrCat(
          "field '", f.name, "' reads member '", f.member, "', but the samples of ", what,
          members.empty()      ? " are files, not shards' members"
          : members.size() < 2 ? " keep only their picture"
                               : absl::StrCat(" keep only their picture and ",
                                              absl::StrJoin(members.begin() + 1, members.end(),
                                                            ", "))));
    f.file = static_cast<uint32_t>(it - members.begin());
    files_ = std::max(files_, f.file + 1);
  }
  if (files_ > files_per_sample)
    return absl::InvalidArgumentError(absl::StrCat(
        "fields read file ", files_ - 1, " of each sample, but the samples of ", what, " have ",
        files_per_sample, " file(s)"));
  return absl::OkStatus();
}

absl::StatusOr<Pipeline> Pipeline::Build(const v1::SessionSpec& spec,
                                         const std::vector<FieldSpec>& fields,
                                         const std::vector<v1::Op>& ops) {
  Pipeline p;
  p.scale_decode_ = spec.decode() == v1::DECODE_AUTO ||
                    spec.decode() == v1::DECODE_SCALE_CROP;
  p.crop_decode_ = spec.decode() != v1::DECODE_FULL;
  // Typed, length-prefixed parts: no field's bytes can run into an op's.
  p.fingerprint_ = CacheKey({"decode", uint64_t{p.scale_decode_}, uint64_t{p.crop_decode_}});
  if (fields.empty()) return absl::InvalidArgumentError("fields: none declared");
  for (const FieldSpec& fs : fields) {
    FieldPlan f;
    absl::Status s = CheckField(fs, &f);
    if (!s.ok()) return s;
    p.files_ = std::max(p.files_, f.file + 1);
    p.has_encoded_ = p.has_encoded_ || f.kind == FieldSpec::KIND_ENCODED;
    absl::StrAppend(&p.fingerprint_, CacheKey({"field", CanonicalBytes(fs)}));
    p.fields_.push_back(std::move(f));
  }
  // Each spatial field's size after the ops so far; -1: data-dependent.
  std::vector<std::pair<int, int>> size(p.fields_.size(), {-1, -1});
  for (size_t k = 0; k < ops.size(); ++k) {
    // The schema's defaults first: flip() and flip(p=0.5) are one pipeline
    // (and one fingerprint).
    v1::Op op = ops[k];
    if (absl::Status s = ApplyOpDefaults(&op); !s.ok()) return s;
    absl::StrAppend(&p.fingerprint_, CacheKey({"op", CanonicalBytes(op)}));
    const std::string where = absl::StrCat("pipeline[", k, "] (", OpName(op), ")");
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", why));
    };
    if (op.op_case() == v1::Op::OP_NOT_SET) return bad("no op given");
    Step step;
    step.op = op;
    step.kind = FindOp(op.op_case());
    if (step.kind == nullptr) return bad("not an op this daemon knows");
    for (size_t i = 0; i < p.fields_.size(); ++i) {
      const FieldPlan& f = p.fields_[i];
      const bool named = std::find(op.fields().begin(), op.fields().end(),
                                   f.name) != op.fields().end();
      const bool fits = step.kind->Fits(f);
      if (named && !fits) {
        return bad(absl::StrCat("field '", f.name, "' is a ", KindName(f.kind), " of ",
                                DTypeName(f.dtype), "; ", OpName(op), " applies to ",
                                FitsText(*step.kind)));
      }
      if (named || (op.fields().empty() && fits)) step.fields.push_back(static_cast<int>(i));
    }
    for (const std::string& name : op.fields()) {
      if (std::none_of(p.fields_.begin(), p.fields_.end(),
                       [&](const FieldPlan& f) { return f.name == name; }))
        return bad(absl::StrCat("no field named '", name, "'"));
    }
    if (step.fields.empty())
      return bad(absl::StrCat("applies to no field: ", OpName(op), " applies to ",
                              FitsText(*step.kind)));
    std::vector<FieldPlan*> applies;
    for (int i : step.fields) applies.push_back(&p.fields_[i]);
    OpTraits traits;
    absl::Status s = step.kind->Check(&step.op, applies, &traits);
    if (!s.ok()) return bad(s.message());
    if (traits.random) p.deterministic_ = false;
    if (traits.label_file >= 0) {
      if (p.label_file_ >= 0 && p.label_file_ != traits.label_file)
        return bad(absl::StrCat("label_bias reads file ", traits.label_file,
                                " but an earlier op's reads file ", p.label_file_,
                                "; a pipeline biases patches by one label array"));
      p.label_file_ = traits.label_file;
    }
    if (traits.size.first != -2) {
      for (int i : step.fields) size[i] = traits.size;
    }
    p.steps_.push_back(std::move(step));
  }
  for (size_t i = 0; i < p.fields_.size(); ++i) {
    const FieldPlan& f = p.fields_[i];
    if (!f.spatial()) continue;
    if (size[i].first < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field '", f.name, "': the pipeline leaves its size data-dependent; "
          "end with a crop, an exact resize or a letterbox to ", f.height,
          "x", f.width));
    }
    if (size[i].first != f.width || size[i].second != f.height) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field '", f.name, "' is ", f.height, "x", f.width,
          " (height x width) but the pipeline makes it ", size[i].second, "x",
          size[i].first));
    }
  }
  if (p.has_spatial() && p.has_arrays())
    return absl::InvalidArgumentError(
        "fields: image/mask/encoded fields come from files, array fields "
        "from npy/hdf5 sources; one session reads one source");
  p.fingerprint_ += absl::StrCat("|decode", spec.decode());
  p.order_fingerprint_ = p.fingerprint_;  // Before the client's part.
  if (spec.has_client_decode()) {
    absl::Status s = p.AddClientFields(spec.client_decode());
    if (!s.ok()) return s;
  }
  return p;
}

bool Pipeline::has_spatial() const {
  return std::any_of(fields_.begin(), fields_.end(), [](const FieldPlan& f) {
    return f.spatial() || f.kind == FieldSpec::KIND_ENCODED;
  });
}

bool Pipeline::has_arrays() const {
  return std::any_of(fields_.begin(), fields_.end(), [](const FieldPlan& f) {
    return f.kind == FieldSpec::KIND_ARRAY;
  });
}

std::vector<uint64_t> Pipeline::RegionOf(const FieldPlan& f,
                                         const std::vector<uint64_t>& shape) {
  return f.patch.empty() ? shape : f.patch;
}

absl::Status Pipeline::CheckArrayShape(const FieldPlan& f,
                                       const std::vector<uint64_t>& shape,
                                       const std::string& what) const {
  // Checked per sample: messages are built only for a misfit.
  if (f.patch.empty()) {
    if (shape == f.shape) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "field '", f.name, "' is [", absl::StrJoin(f.shape, ", "), "] but ", what,
        " is [", absl::StrJoin(shape, ", "), "]: declare that shape or add a "
        "random_patch op"));
  }
  bool fits = shape.size() == f.patch.size();
  for (size_t d = 0; fits && d < shape.size(); ++d) fits = f.patch[d] <= shape[d];
  if (fits) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "random_patch [", absl::StrJoin(f.patch, ", "), "] of field '", f.name,
      "' does not fit ", what, " [", absl::StrJoin(shape, ", "), "]"));
}

void Pipeline::Draw(SampleDraw& d) const {
  for (const Step& step : steps_) {
    d.fields = step.fields;
    step.kind->Draw(step.op, d);
  }
}

std::vector<std::vector<uint64_t>> Pipeline::PlanArrays(
    const std::vector<uint64_t>& shape, uint64_t seed, uint64_t epoch,
    uint64_t index, std::vector<Effects>* effects, const Foreground* foreground) const {
  std::vector<std::vector<uint64_t>> starts(fields_.size(),
                                            std::vector<uint64_t>(shape.size(), 0));
  if (effects != nullptr) effects->assign(fields_.size(), {});
  Rng rng(MixSeed({seed, epoch, index}));
  SampleDraw d{rng, fields_};
  d.shape = &shape;
  d.starts = &starts;
  d.effects = effects;
  d.foreground = foreground;
  Draw(d);
  return starts;
}

void Pipeline::ApplyArray(const FieldPlan& f, const Effects& effects, uint8_t* out) {
  for (const Effect& e : effects) e.kind->ApplyArray(e, f, out);
}

shm::RingGeometry Pipeline::Geometry(uint32_t slots, uint32_t batch_size) const {
  shm::RingGeometry g;
  g.slots = slots;
  g.batch_size = batch_size;
  for (const FieldPlan& f : fields_) {
    g.fields.push_back(shm::FieldGeometry{f.name, f.dtype, f.shape});
  }
  return g;
}

std::vector<Canvas> Pipeline::Plan(int width, int height, uint64_t seed,
                                   uint64_t epoch, uint64_t index,
                                   std::vector<Effects>* effects) const {
  std::vector<Canvas> c(fields_.size(), Canvas::Source(width, height));
  for (size_t i = 0; i < fields_.size(); ++i) {
    if (fields_[i].kind == FieldSpec::KIND_MASK) c[i].filter = Filter::kNearest;
  }
  if (effects != nullptr) effects->assign(fields_.size(), {});
  Rng rng(MixSeed({seed, epoch, index}));
  SampleDraw d{rng, fields_};
  d.canvases = &c;
  d.effects = effects;
  Draw(d);
  return c;
}

ImageRequest Pipeline::Request(const FieldPlan& f, const DecodeLimits& limits) const {
  ImageRequest r;
  r.channels = f.channels;
  r.elem_bytes = f.dtype == shm::kDTypeUint16 ? 2 : 1;
  r.indices = f.kind == FieldSpec::KIND_MASK;
  r.limits = limits;
  return r;
}

RegionRequest Pipeline::Region(const FieldPlan& f, const Canvas& canvas,
                               int source_w, int source_h) const {
  const RenderPlan rp = PlanRender(canvas, source_w, source_h);
  if (rp.empty()) return RegionRequest{8, PixelRect{0, 0, source_w, source_h}, false};
  const bool image = f.kind == FieldSpec::KIND_IMAGE;
  const DecodePlan d = PlanDecode(source_w, source_h, rp.box, rp.x1 - rp.x0,
                                  rp.y1 - rp.y0, scale_decode_ && image,
                                  crop_decode_, canvas.filter == Filter::kBicubic ? 2 : 1);
  return RegionRequest{d.eighths, d.need, crop_decode_};
}

void Pipeline::Write(const FieldPlan& f, const Canvas& canvas, const ImageView& img,
                     int source_w, int source_h, uint8_t* out,
                     const Effects* effects) const {
  const RenderPlan rp = PlanRender(canvas, source_w, source_h);
  const double sx = static_cast<double>(img.scaled_width) / source_w;
  const double sy = static_cast<double>(img.scaled_height) / source_h;
  const bool direct = f.dtype == shm::kDTypeUint8 ? !f.chw || f.channels == 1
                                                  : f.kind == FieldSpec::KIND_MASK;
  const uint32_t pad = f.kind == FieldSpec::KIND_MASK ? f.pad : canvas.fill;
  const bool pixels = effects != nullptr && !effects->empty();
  if (direct) {
    Render(canvas, img.pixels, img.width, img.height, img.channels,
           img.elem_bytes, rp, sx, sy, img.x, img.y, pad, out);
    // The per-pixel stage, in place: uint8 HWC (or one channel) is the
    // rendered layout.
    if (pixels) {
      for (const Effect& e : *effects) e.kind->ApplyPixels(e, f, out);
    }
    return;
  }
  thread_local std::vector<uint8_t> hwc;
  hwc.resize(static_cast<size_t>(f.height) * f.width * f.channels);
  Render(canvas, img.pixels, img.width, img.height, img.channels, 1, rp,
         sx, sy, img.x, img.y, pad, hwc.data());
  if (pixels) {
    for (const Effect& e : *effects) e.kind->ApplyPixels(e, f, hwc.data());
  }
  Convert(f, hwc.data(), out);
}

}  // namespace stoker
