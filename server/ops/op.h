// A pipeline op as one unit: the spec case it answers to, the fields it may
// apply to, how its parameters are checked, what it draws per sample, and
// what it does to the geometry (a Canvas step) or to pixels (the per-pixel
// stage, between render and convert).
//
// Each op lives in server/ops/<op>.cc, defines one OpKind and is registered
// by one line in server/ops/ops.def; Pipeline's Build and Plan are loops
// over the registry and never name an op.
//
// Draws come from the sample's one Rng (seed, epoch, sample index) in op
// order, and an op draws only when it is in the pipeline, so adding an op
// to the registry changes no existing pipeline's output. Every field a step
// applies to gets the same draw (an image and its mask stay aligned).
//
// OpKinds are stateless singletons: thread-safe.
#ifndef STOKER_SERVER_OPS_OP_H_
#define STOKER_SERVER_OPS_OP_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/spec_util.h"
#include "proto/stoker.pb.h"
#include "server/imaging/foreground.h"
#include "server/imaging/geometry.h"
#include "server/imaging/transform.h"
#include "util/rng.h"

namespace stoker {

// One batch field as the pipeline compiled it.
struct FieldPlan {
  std::string name;
  v1::FieldSpec::Kind kind = v1::FieldSpec::KIND_UNSPECIFIED;
  uint32_t dtype = 0;           // Ring code (shm::DType).
  std::vector<uint64_t> shape;  // Per sample, as in the ring.
  int height = 0, width = 0, channels = 0;  // Images and masks.
  bool chw = false;
  uint32_t file = 0;
  std::string member;  // Shards: the member `file` holds (FieldSpec.member).
  bool text = false;   // A manifest's text file (FieldSpec.text).
  uint32_t pad = 0;
  // Float images (x in 0..255).
  Normalization norm;
  // Array fields: the random_patch shape (empty: the whole sample).
  std::vector<uint64_t> patch;
  // Client decode: an image field's F_jpeg and F_render fields (-1: the
  // daemon decodes it always). F_jpeg (an encoded field) and F_render
  // (float32 [kRenderFloats], no spec kind) name F in `client_of`.
  int client_jpeg = -1, client_render = -1;
  int client_of = -1;
  bool spatial() const {
    return kind == v1::FieldSpec::KIND_IMAGE || kind == v1::FieldSpec::KIND_MASK;
  }
  bool is_float() const;  // A float dtype (shm/dtypes.h).
};

// "image", "mask", ...: how errors name them (dtypes: DTypeName in
// proto/spec_util.h).
const char* KindName(v1::FieldSpec::Kind kind);

class OpKind;

// One op's per-sample draw for the per-pixel stage of one field.
struct Effect {
  const OpKind* kind = nullptr;
  const v1::Op* op = nullptr;  // The compiled step's (defaults applied).
  absl::InlinedVector<double, 8> v;
};
using Effects = std::vector<Effect>;

// What a step's Check decides once per pipeline.
struct OpTraits {
  // Spatial fields' size after the op: {-2, -2} unchanged, {-1, -1}
  // data-dependent, else {width, height}.
  std::pair<int, int> size{-2, -2};
  bool random = false;  // Draws per sample (the output is not cacheable).
  // The array file (FieldSpec.file) whose foreground Draw needs
  // (SampleDraw::foreground); -1: none.
  int label_file = -1;
};

// One sample's draw in progress. `fields` are the indices the step applies
// to; Plan fills `canvases` (pictures of spatial fields), PlanArrays
// `shape` and `starts` (array fields); `effects` may be null (geometry
// only), and the op must draw the same either way.
struct SampleDraw {
  Rng& rng;
  const std::vector<FieldPlan>& plans;
  absl::Span<const int> fields;  // The step's own list: no copy per sample.
  std::vector<Canvas>* canvases = nullptr;
  const std::vector<uint64_t>* shape = nullptr;
  std::vector<std::vector<uint64_t>>* starts = nullptr;
  std::vector<Effects>* effects = nullptr;
  // Array samples: the foreground of the array OpTraits::label_file names
  // (server/imaging/foreground.h); null when no op needs one.
  const Foreground* foreground = nullptr;

  // Adds `e` to every field of the step.
  void Add(const Effect& e) const;
};

class OpKind {
 public:
  virtual ~OpKind() = default;

  virtual v1::Op::OpCase op_case() const = 0;
  // Whether the op may apply to `f`, and how an error says which fields it
  // may ("images and masks"). An op without `fields` applies to every field
  // it fits.
  virtual bool Fits(const FieldPlan& f) const = 0;
  virtual const char* fits() const = 0;
  // Checks the op's parameters against the fields it applies to, writes its
  // defaults into *op, and records in the fields' plans what the op decides
  // once (a normalization, a patch). Errors are INVALID_ARGUMENT saying why;
  // the caller prefixes the op's position and name.
  virtual absl::Status Check(v1::Op* op, const std::vector<FieldPlan*>& fields,
                             OpTraits* traits) const = 0;
  // Draws this sample's parameters and applies them to the geometry, or
  // adds an Effect for the per-pixel stage.
  virtual void Draw(const v1::Op& op, SampleDraw& d) const {}
  // The per-pixel stage of an image field: `e` applied to its rendered
  // pixels (packed uint8, f.width x f.height x f.channels).
  virtual void ApplyPixels(const Effect& e, const FieldPlan& f, uint8_t* hwc) const {}
  // The value stage of a float array field, for ops whose values() is
  // true: `e` applied to the field's sample as n float32 values (f.shape,
  // row-major), in op order, before the conversion to the field's dtype.
  virtual bool values() const { return false; }
  virtual void ApplyValues(const Effect& e, const FieldPlan& f, float* v, uint64_t n) const {}
  // The per-pixel stage of an array field, after the value stage and the
  // conversion: `e` applied to the field's sample as written (f.shape, the
  // field's dtype), in op order.
  virtual void ApplyArray(const Effect& e, const FieldPlan& f, uint8_t* out) const {}
};

// Defines `const OpKind& Name()`, the function ops.def registers, for the
// stateless OpKind subclass `Kind`.
#define STOKER_DEFINE_OP(Name, Kind) \
  const OpKind& Name() {             \
    static const Kind kind;          \
    return kind;                     \
  }

// Image-only ops of the per-pixel stage.
class PixelOp : public OpKind {
 public:
  bool Fits(const FieldPlan& f) const override { return f.kind == v1::FieldSpec::KIND_IMAGE; }
  const char* fits() const override { return "images"; }
};

// Ops whose value stage is x * a + b with their effect's v = {a, b}.
class AffineValuesOp : public OpKind {
 public:
  bool values() const override { return true; }
  void ApplyValues(const Effect& e, const FieldPlan& f, float* v, uint64_t n) const override;
};

// INVALID_ARGUMENT for an op's `probability` outside 0..1. (Defaults of
// unset parameters are the schema's, applied before Check: proto/schema.h.)
absl::Status CheckProbability(float p);

// The registry (server/ops/ops.def order).
const std::vector<const OpKind*>& AllOps();
// The op registered for `op_case`; null when none is.
const OpKind* FindOp(v1::Op::OpCase op_case);
// The op's name as the spec spells it ("random_crop"; "none" when unset).
std::string OpName(const v1::Op& op);

// Shared parameter checks: "width and height must be in 1..kMaxSide".
absl::Status CheckSize(uint32_t width, uint32_t height);
// A [min, max] range within [lo, hi], min <= max, finite; `what` names it.
absl::Status CheckRange(const v1::Range& r, double lo, double hi, const char* what);

}  // namespace stoker

#endif  // STOKER_SERVER_OPS_OP_H_
