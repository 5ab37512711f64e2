// A session's per-sample program, compiled once from its spec: the batch's
// fields and the ops applied to every sample. The presets (`val`, `train`)
// compile to the same ops a user could write, so they run on this path too.
//
// Compile() validates everything that does not depend on the data and
// answers INVALID_ARGUMENT naming the op (by position and kind) and the
// field: unknown or empty ops, fields an op cannot apply to, dtypes and
// shapes a field kind does not allow, a pipeline whose output size is not
// the field's shape. What depends on the data (a file that is not an image,
// fields of one sample with different sizes) is a per-sample error.
//
// Per sample, Plan() draws the random geometry once from (seed, epoch,
// sample index) in op order and returns one Canvas per field, plus the
// per-pixel effects each field gets between render and convert: every
// field an op names gets the same draw, so an image and its mask stay
// aligned. The ops themselves are server/ops (one unit each, registered
// in server/ops/ops.def); this class only loops over them.
// Immutable after Compile; thread-safe.
#ifndef STOKER_SERVER_PIPELINE_PIPELINE_H_
#define STOKER_SERVER_PIPELINE_PIPELINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/stoker.pb.h"
#include "server/imaging/decode.h"
#include "server/imaging/geometry.h"
#include "server/ops/op.h"
#include "shm/ring.h"

namespace stoker {


// A client-decode render record: float32 slots, named here once. The
// daemon sends the names in order with each field it hands over
// (ClientDecodeField.record), so a client looks slots up by name:
// where (1: the client decodes), the source size, the content rectangle in
// the output, the source box, the flips, the padding's fill, the filter
// (Interpolation), whether the JPEG is progressive.
#define STOKER_RENDER_SLOTS(X)                                              \
  X(kWhere, "where") X(kSourceWidth, "src_w") X(kSourceHeight, "src_h")      \
  X(kX0, "x0") X(kY0, "y0") X(kX1, "x1") X(kY1, "y1") X(kBoxX, "box_x")      \
  X(kBoxY, "box_y") X(kBoxW, "box_w") X(kBoxH, "box_h") X(kHFlip, "hflip")   \
  X(kVFlip, "vflip") X(kFill, "fill") X(kFilter, "filter")                   \
  X(kProgressive, "progressive")
enum RenderSlot : int {
#define STOKER_SLOT(slot, name) slot,
  STOKER_RENDER_SLOTS(STOKER_SLOT)
#undef STOKER_SLOT
  kRenderFloats
};

// SessionSpec.client_decode with defaults applied.
struct ClientDecodePlan {
  bool on = false;
  uint32_t share = 0;  // Of shm::kShareOne.
  uint32_t max_bytes = 0;
  uint64_t max_pixels = 0;
};

class Pipeline {
 public:
  static absl::StatusOr<Pipeline> Compile(const v1::SessionSpec& spec);

  const std::vector<FieldPlan>& fields() const { return fields_; }
  shm::RingGeometry Geometry(uint32_t slots, uint32_t batch_size) const;
  // Files each sample must have (1 + the largest `file` of a field).
  uint32_t files() const { return files_; }
  // Binds the pipeline to its dataset's samples before a session runs it:
  // each field reading a shard's member (FieldSpec.member) reads the file
  // `members` (Dataset::member_files) names so; INVALID_ARGUMENT naming the
  // field when no file is that member, or the dataset `what` when a
  // sample has fewer than files() files.
  absl::Status BindFiles(uint32_t files_per_sample, const std::vector<std::string>& members,
                         const std::string& what);
  // No random op: a sample's output depends only on its data.
  bool deterministic() const { return deterministic_; }
  // Deterministic, and every field but labels is pixels the daemon makes
  // (no encoded bytes): finished samples may be kept in the decoded cache.
  bool cacheable() const { return deterministic_ && !has_encoded_; }
  // Whether a field carries a file's bytes as stored (KIND_ENCODED).
  bool has_encoded() const { return has_encoded_; }
  // Whether JPEGs are decoded per crop (only its region), and whether at
  // the DCT scale each crop allows: then a JPEG's pixels depend on each
  // sample's geometry.
  bool crop_decode() const { return crop_decode_; }
  bool scale_decode() const { return scale_decode_; }
  const ClientDecodePlan& client_decode() const { return client_; }
  // What the client needs to render each image field it decodes.
  std::vector<v1::ClientDecodeField> ClientFields() const;
  // Writes a render record (where = 1: the client decodes it; progressive:
  // the JPEG is) for a source_w x source_h picture rendered as `canvas`.
  void WriteRender(const Canvas& canvas, int source_w, int source_h,
                   bool client, bool progressive, uint8_t* out) const;
  // Identifies fields + ops + decode mode (for cache keys): typed,
  // length-prefixed parts of each message's known fields, serialized
  // deterministically, so equal pipelines match and different ones never do.
  const std::string& fingerprint() const { return fingerprint_; }
  // The fingerprint but for the client's decoding (client_decode), which
  // changes what the ring carries, never which samples a batch holds or
  // their augmentation: what a resumed run must match (OrderKey), so a run
  // may resume with the client's decoding on or off.
  const std::string& order_fingerprint() const { return order_fingerprint_; }

  // The canvases of a sample whose spatial fields are width x height and,
  // when `effects` is given, each field's per-pixel effects.
  std::vector<Canvas> Plan(int width, int height, uint64_t seed, uint64_t epoch,
                           uint64_t index, std::vector<Effects>* effects = nullptr) const;

  // Whether any field is an image/mask/encoded (needs files) or an array
  // (needs an npy/HDF5 source).
  bool has_spatial() const;
  bool has_arrays() const;
  // Array fields are whole samples as stored (no op draws or changes
  // anything: feature rows), so PlanArrays would give only zeros.
  bool whole_arrays() const { return has_arrays() && steps_.empty(); }
  // INVALID_ARGUMENT when a sample of `shape` cannot fill array field `f`
  // (its shape, or a patch larger than the sample); `what` names it.
  absl::Status CheckArrayShape(const FieldPlan& f,
                               const std::vector<uint64_t>& shape,
                               const std::string& what) const;
  // The array file whose foreground PlanArrays needs (a random_patch's
  // label_bias), -1 when none does.
  int label_file() const { return label_file_; }
  // The start of each array field's region in a sample of `shape` (zeros
  // without a patch), drawn like Plan's geometry, and when `effects` is
  // given each field's per-pixel effects (ApplyArray). `foreground`: the
  // sample's label_file() array's (null: patches drawn uniformly).
  std::vector<std::vector<uint64_t>> PlanArrays(
      const std::vector<uint64_t>& shape, uint64_t seed, uint64_t epoch,
      uint64_t index, std::vector<Effects>* effects = nullptr,
      const Foreground* foreground = nullptr) const;
  // Applies an array field's effects to its sample as written at `out`.
  static void ApplyArray(const FieldPlan& f, const Effects& effects, uint8_t* out);
  // The region's size for field f in a sample of `shape`.
  static std::vector<uint64_t> RegionOf(const FieldPlan& f,
                                        const std::vector<uint64_t>& shape);

  // What to ask the decoder for field `f`.
  ImageRequest Request(const FieldPlan& f, const DecodeLimits& limits) const;
  // The decoder's scale/region for field `f` of a source_w x source_h file
  // rendered as `canvas`.
  RegionRequest Region(const FieldPlan& f, const Canvas& canvas, int source_w,
                       int source_h) const;
  // Renders decoded `img` (of a source_w x source_h file) as `canvas`,
  // applies the field's per-pixel `effects`, and writes the field's sample
  // (sample_bytes of the ring) at `out`.
  void Write(const FieldPlan& f, const Canvas& canvas, const ImageView& img,
             int source_w, int source_h, uint8_t* out,
             const Effects* effects = nullptr) const;

 private:
  struct Step {
    const OpKind* kind = nullptr;
    v1::Op op;                // Defaults applied.
    std::vector<int> fields;  // The fields it applies to.
  };
  // Draws every step for one sample.
  void Draw(SampleDraw& d) const;
  static absl::StatusOr<Pipeline> Build(const v1::SessionSpec& spec,
                                        const std::vector<v1::FieldSpec>& fields,
                                        const std::vector<v1::Op>& ops);
  // Adds each image field's F_jpeg and F_render (spec.client_decode).
  absl::Status AddClientFields(const v1::ClientDecode& c);

  std::vector<FieldPlan> fields_;
  std::vector<Step> steps_;
  uint32_t files_ = 1;
  int label_file_ = -1;
  bool deterministic_ = true;
  bool scale_decode_ = true, crop_decode_ = true;
  bool has_encoded_ = false;
  ClientDecodePlan client_;
  std::string fingerprint_;
  std::string order_fingerprint_;
};

}  // namespace stoker

#endif  // STOKER_SERVER_PIPELINE_PIPELINE_H_
