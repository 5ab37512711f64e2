#include "server/pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/spec_util.h"
#include "util/rng.h"

namespace stoker {
namespace {

using v1::FieldSpec;

const char* KindName(FieldSpec::Kind k) {
  switch (k) {
    case FieldSpec::KIND_IMAGE: return "image";
    case FieldSpec::KIND_MASK: return "mask";
    case FieldSpec::KIND_LABEL: return "label";
    case FieldSpec::KIND_ARRAY: return "array";
    case FieldSpec::KIND_ENCODED: return "encoded";
    default: return "unspecified";
  }
}

std::string DTypeName(v1::DType d) {
  std::string n = v1::DType_Name(d);
  return absl::AsciiStrToLower(n.substr(6));  // Without "DTYPE_".
}

// The op's name as the spec spells it ("random_crop").
std::string OpName(const v1::Op& op) {
  const auto* f = op.GetDescriptor()->FindFieldByNumber(op.op_case());
  return f == nullptr ? "none" : f->name();
}

Filter FilterOf(v1::Interpolation i) {
  return i == v1::INTERPOLATION_BICUBIC   ? Filter::kBicubic
         : i == v1::INTERPOLATION_NEAREST ? Filter::kNearest
                                          : Filter::kBilinear;
}

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
    ops->emplace_back().mutable_flip()->set_probability(0.5f);
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
    const float mean[3] = {0.485f, 0.456f, 0.406f};
    const float std[3] = {0.229f, 0.224f, 0.225f};
    for (int c = 0; c < 3; ++c) {
      n->add_mean(spec.mean_size() == 3 ? spec.mean(c) : mean[c]);
      n->add_std(spec.std_size() == 3 ? spec.std(c) : std[c]);
    }
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
  const std::string dtype = DTypeName(fs.dtype());
  const std::string shape = absl::StrCat("[", absl::StrJoin(fs.shape(), ", "), "]");
  switch (fs.kind()) {
    case FieldSpec::KIND_IMAGE: {
      if (fs.dtype() != v1::DTYPE_UINT8 && fs.dtype() != v1::DTYPE_FLOAT32 &&
          fs.dtype() != v1::DTYPE_FLOAT16)
        return bad(absl::StrCat("dtype ", dtype, " not allowed; images are "
                                "uint8, float32 or float16"));
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
      if (fs.dtype() != v1::DTYPE_UINT8) {
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
      if (fs.shape_size() > 6) return bad(absl::StrCat("shape ", shape, ": at most 6 dimensions"));
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
  if (f->spatial() && (f->height <= 0 || f->width <= 0 ||
                       f->height > 16384 || f->width > 16384))
    return bad(absl::StrCat("shape ", shape, ": height and width must be in 1..16384"));
  return absl::OkStatus();
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
  WriteNormalized(hwc, plane, c, f.norm, f.chw, f.dtype == shm::kDTypeFloat16, out);
}

}  // namespace

absl::StatusOr<Pipeline> Pipeline::Compile(const v1::SessionSpec& spec) {
  if (spec.fields_size() == 0) {
    if (spec.pipeline_size() > 0)
      return absl::InvalidArgumentError("pipeline needs fields: declare the "
                                        "batch's fields it produces");
    std::vector<FieldSpec> fields;
    std::vector<v1::Op> ops;
    PresetOps(spec, &fields, &ops);
    return Build(spec, fields, ops);
  }
  if (spec.transform() != v1::TRANSFORM_UNSPECIFIED || spec.image_size() != 0 ||
      spec.dtype() != v1::DTYPE_UINT8 || spec.mean_size() || spec.std_size())
    return absl::InvalidArgumentError(
        "fields/pipeline replace the preset: leave transform, image_size, "
        "dtype, mean and std unset (use a normalize op and the fields' dtype)");
  return Build(spec, {spec.fields().begin(), spec.fields().end()},
               {spec.pipeline().begin(), spec.pipeline().end()});
}

absl::StatusOr<Pipeline> Pipeline::Build(const v1::SessionSpec& spec,
                                         const std::vector<FieldSpec>& fields,
                                         const std::vector<v1::Op>& ops) {
  Pipeline p;
  p.scale_decode_ = spec.decode() == v1::DECODE_AUTO ||
                    spec.decode() == v1::DECODE_SCALE_CROP;
  p.crop_decode_ = spec.decode() != v1::DECODE_FULL;
  if (fields.empty()) return absl::InvalidArgumentError("fields: none declared");
  for (const FieldSpec& fs : fields) {
    FieldPlan f;
    absl::Status s = CheckField(fs, &f);
    if (!s.ok()) return s;
    p.files_ = std::max(p.files_, f.file + 1);
    p.has_encoded_ = p.has_encoded_ || f.kind == FieldSpec::KIND_ENCODED;
    p.fingerprint_ += fs.SerializeAsString();
    p.fields_.push_back(std::move(f));
  }
  // Each spatial field's size after the ops so far; -1: data-dependent.
  std::vector<std::pair<int, int>> size(p.fields_.size(), {-1, -1});
  for (size_t k = 0; k < ops.size(); ++k) {
    const v1::Op& op = ops[k];
    p.fingerprint_ += op.SerializeAsString();
    const std::string where = absl::StrCat("pipeline[", k, "] (", OpName(op), ")");
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", why));
    };
    if (op.op_case() == v1::Op::OP_NOT_SET) return bad("no op given");
    Step step;
    step.op = op;
    const bool normalize = op.op_case() == v1::Op::kNormalize;
    for (size_t i = 0; i < p.fields_.size(); ++i) {
      const FieldPlan& f = p.fields_[i];
      const bool named = std::find(op.fields().begin(), op.fields().end(),
                                   f.name) != op.fields().end();
      const bool is_float = f.dtype == shm::kDTypeFloat32 || f.dtype == shm::kDTypeFloat16;
      const bool patch = op.op_case() == v1::Op::kRandomPatch;
      const bool fits = normalize ? (f.kind == FieldSpec::KIND_IMAGE ||
                                     f.kind == FieldSpec::KIND_ARRAY) && is_float
                        : patch   ? f.kind == FieldSpec::KIND_ARRAY
                                  : f.spatial();
      if (named && !fits) {
        return bad(absl::StrCat(
            "field '", f.name, "' is a ", KindName(f.kind), " of ",
            DTypeName(static_cast<v1::DType>(f.dtype - 1)), "; ", OpName(op),
            normalize ? " applies to float32/float16 images and arrays"
            : patch   ? " applies to arrays"
                      : " applies to images and masks"));
      }
      if (named || (op.fields().empty() && fits)) step.fields.push_back(static_cast<int>(i));
    }
    for (const std::string& name : op.fields()) {
      if (std::none_of(p.fields_.begin(), p.fields_.end(),
                       [&](const FieldPlan& f) { return f.name == name; }))
        return bad(absl::StrCat("no field named '", name, "'"));
    }
    if (step.fields.empty()) return bad("applies to no field");
    std::pair<int, int> out{-2, -2};  // -2: unchanged.
    switch (op.op_case()) {
      case v1::Op::kResize: {
        const v1::ResizeOp& r = op.resize();
        if (r.mode() == v1::ResizeOp::MODE_EXACT) {
          if (r.width() == 0 || r.height() == 0 || r.width() > 16384 || r.height() > 16384)
            return bad("exact needs width and height in 1..16384");
          out = {static_cast<int>(r.width()), static_cast<int>(r.height())};
        } else {
          if (r.size() == 0 || r.size() > 16384) return bad("size must be in 1..16384");
          out = r.mode() == v1::ResizeOp::MODE_LETTERBOX
                    ? std::pair<int, int>{static_cast<int>(r.size()), static_cast<int>(r.size())}
                    : std::pair<int, int>{-1, -1};
        }
        if (r.fill() > 255) return bad("fill must be in 0..255");
        break;
      }
      case v1::Op::kCenterCrop:
      case v1::Op::kRandomCrop:
      case v1::Op::kRandomResizedCrop: {
        const uint32_t w = op.has_center_crop() ? op.center_crop().width()
                           : op.has_random_crop() ? op.random_crop().width()
                                                  : op.random_resized_crop().width();
        const uint32_t h = op.has_center_crop() ? op.center_crop().height()
                           : op.has_random_crop() ? op.random_crop().height()
                                                  : op.random_resized_crop().height();
        if (w == 0 || h == 0 || w > 16384 || h > 16384)
          return bad("width and height must be in 1..16384");
        out = {static_cast<int>(w), static_cast<int>(h)};
        if (op.has_random_resized_crop()) {
          v1::RandomResizedCropOp* r = step.op.mutable_random_resized_crop();
          if (r->scale_min() == 0 && r->scale_max() == 0) {
            r->set_scale_min(0.08f);
            r->set_scale_max(1.0f);
          }
          if (r->ratio_min() == 0 && r->ratio_max() == 0) {
            r->set_ratio_min(3.0f / 4.0f);
            r->set_ratio_max(4.0f / 3.0f);
          }
          if (!(r->scale_min() > 0 && r->scale_min() <= r->scale_max() && r->scale_max() <= 1))
            return bad("scale must satisfy 0 < scale_min <= scale_max <= 1");
          if (!(r->ratio_min() > 0 && r->ratio_min() <= r->ratio_max()))
            return bad("ratio must satisfy 0 < ratio_min <= ratio_max");
        }
        if (!op.has_center_crop()) p.deterministic_ = false;
        break;
      }
      case v1::Op::kFlip: {
        const float pr = op.flip().has_probability() ? op.flip().probability() : 0.5f;
        if (!(pr >= 0 && pr <= 1)) return bad("probability must be in 0..1");
        step.op.mutable_flip()->set_probability(pr);
        p.deterministic_ = false;
        break;
      }
      case v1::Op::kRandomPatch: {
        const auto& shape = op.random_patch().shape();
        for (int i : step.fields) {
          FieldPlan& f = p.fields_[i];
          if (static_cast<size_t>(shape.size()) != f.shape.size() ||
              !std::equal(shape.begin(), shape.end(), f.shape.begin()))
            return bad(absl::StrCat("patch [", absl::StrJoin(shape, ", "),
                                    "] differs from field '", f.name, "' [",
                                    absl::StrJoin(f.shape, ", "), "]"));
          f.patch.assign(shape.begin(), shape.end());
        }
        p.deterministic_ = false;
        break;
      }
      case v1::Op::kNormalize: {
        const v1::NormalizeOp& n = op.normalize();
        for (int i : step.fields) {
          FieldPlan& f = p.fields_[i];
          if (f.kind == FieldSpec::KIND_ARRAY) {
            if (n.mean_size() != 1 || n.std_size() != 1)
              return bad(absl::StrCat("mean and std need 1 value each for array field '",
                                      f.name, "'"));
            if (!(n.std(0) > 0)) return bad(absl::StrCat("std values must be > 0, got ", n.std(0)));
            f.normalize = true;
            f.norm.scale[0] = 1.0f / n.std(0);
            f.norm.offset[0] = -n.mean(0) / n.std(0);
            continue;
          }
          const int c = f.channels;
          if ((n.mean_size() != 1 && n.mean_size() != c) ||
              (n.std_size() != 1 && n.std_size() != c))
            return bad(absl::StrCat("mean and std need 1 or ", c,
                                    " values for field '", f.name, "'"));
          for (int ch = 0; ch < c; ++ch) {
            const float m = n.mean(n.mean_size() == 1 ? 0 : ch);
            const float s = n.std(n.std_size() == 1 ? 0 : ch);
            if (!(s > 0)) return bad(absl::StrCat("std values must be > 0, got ", s));
            f.norm.scale[ch] = 1.0f / (255.0f * s);
            f.norm.offset[ch] = -m / s;
          }
        }
        break;
      }
      default:
        return bad("not an op this daemon knows");
    }
    if (out.first != -2) {
      for (int i : step.fields) size[i] = out;
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

std::vector<std::vector<uint64_t>> Pipeline::PlanArrays(
    const std::vector<uint64_t>& shape, uint64_t seed, uint64_t epoch,
    uint64_t index) const {
  std::vector<std::vector<uint64_t>> starts(fields_.size(),
                                            std::vector<uint64_t>(shape.size(), 0));
  Rng rng(MixSeed({seed, epoch, index}));
  for (const Step& step : steps_) {
    if (step.op.op_case() != v1::Op::kRandomPatch) continue;
    // One draw per op, shared by the fields it names.
    const std::vector<uint64_t>& patch = fields_[step.fields[0]].patch;
    std::vector<uint64_t> start(shape.size(), 0);
    for (size_t d = 0; d < shape.size() && d < patch.size(); ++d) {
      start[d] = shape[d] > patch[d] ? rng.Below(shape[d] - patch[d] + 1) : 0;
    }
    for (int i : step.fields) starts[i] = start;
  }
  return starts;
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
                                   uint64_t epoch, uint64_t index) const {
  std::vector<Canvas> c(fields_.size(), Canvas::Source(width, height));
  for (size_t i = 0; i < fields_.size(); ++i) {
    if (fields_[i].kind == FieldSpec::KIND_MASK) c[i].filter = Filter::kNearest;
  }
  Rng rng(MixSeed({seed, epoch, index}));
  for (const Step& step : steps_) {
    const v1::Op& op = step.op;
    const Canvas& base = c[step.fields[0]];  // Draws use the first field's size.
    auto each = [&](auto&& fn) {
      for (int i : step.fields) fn(c[i]);
    };
    auto interpolate = [&](v1::Interpolation interp) {  // Masks stay nearest.
      for (int i : step.fields) {
        if (fields_[i].kind == FieldSpec::KIND_IMAGE) c[i].filter = FilterOf(interp);
      }
    };
    switch (op.op_case()) {
      case v1::Op::kResize: {
        const v1::ResizeOp& r = op.resize();
        const int s = static_cast<int>(r.size());
        switch (r.mode()) {
          case v1::ResizeOp::MODE_EXACT:
            each([&](Canvas& k) { k.Resize(r.width(), r.height()); });
            break;
          case v1::ResizeOp::MODE_LONGER:
            each([&](Canvas& k) { k.ResizeLonger(s); });
            break;
          case v1::ResizeOp::MODE_LETTERBOX:
            each([&](Canvas& k) {
              k.Letterbox(s);
              k.fill = r.fill();
            });
            break;
          default:
            each([&](Canvas& k) { k.ResizeShorter(s); });
        }
        interpolate(r.interpolation());
        break;
      }
      case v1::Op::kCenterCrop:
        each([&](Canvas& k) { k.CenterCrop(op.center_crop().width(), op.center_crop().height()); });
        break;
      case v1::Op::kRandomResizedCrop: {
        const v1::RandomResizedCropOp& r = op.random_resized_crop();
        const CropBox b = RandomResizedCropWindow(base.w, base.h, r.scale_min(),
                                                  r.scale_max(), r.ratio_min(),
                                                  r.ratio_max(), rng);
        each([&](Canvas& k) {
          k.Crop(static_cast<int>(b.x), static_cast<int>(b.y), static_cast<int>(b.w),
                 static_cast<int>(b.h));
          k.Resize(r.width(), r.height());
        });
        interpolate(r.interpolation());
        break;
      }
      case v1::Op::kRandomCrop: {
        const int w = static_cast<int>(op.random_crop().width());
        const int h = static_cast<int>(op.random_crop().height());
        // torchvision's order: top, then left; a short side is padded
        // evenly instead (pad_if_needed).
        const int top = base.h >= h ? static_cast<int>(rng.Below(base.h - h + 1))
                                    : -((h - base.h) / 2);
        const int left = base.w >= w ? static_cast<int>(rng.Below(base.w - w + 1))
                                     : -((w - base.w) / 2);
        each([&](Canvas& k) { k.Crop(left, top, w, h); });
        break;
      }
      case v1::Op::kFlip:
        if (rng.Uniform01() < op.flip().probability()) {
          each([&](Canvas& k) {
            op.flip().vertical() ? k.FlipVertical() : k.FlipHorizontal();
          });
        }
        break;
      default:
        break;  // Not geometry.
    }
  }
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
                     int source_w, int source_h, uint8_t* out) const {
  const RenderPlan rp = PlanRender(canvas, source_w, source_h);
  const double sx = static_cast<double>(img.scaled_width) / source_w;
  const double sy = static_cast<double>(img.scaled_height) / source_h;
  const bool direct = f.dtype == shm::kDTypeUint8 ? !f.chw || f.channels == 1
                                                  : f.kind == FieldSpec::KIND_MASK;
  const uint32_t pad = f.kind == FieldSpec::KIND_MASK ? f.pad : canvas.fill;
  if (direct) {
    Render(canvas, img.pixels, img.width, img.height, img.channels,
           img.elem_bytes, rp, sx, sy, img.x, img.y, pad, out);
    return;
  }
  thread_local std::vector<uint8_t> hwc;
  hwc.resize(static_cast<size_t>(f.height) * f.width * f.channels);
  Render(canvas, img.pixels, img.width, img.height, img.channels, 1, rp,
         sx, sy, img.x, img.y, pad, hwc.data());
  Convert(f, hwc.data(), out);
}

}  // namespace stoker
