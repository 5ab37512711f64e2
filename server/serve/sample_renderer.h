// A session's decode stage: one sample's image, mask and encoded fields
// written from what the reader fetched (server/serve/sample_reader.h).
//
// Each spatial field's picture comes from the reader (decoded, or the
// pixel cache's); the sample's random geometry is drawn once, from its
// first picture's size and (seed, epoch, index); each field is rendered
// and written by the pipeline. Every picture of a sample must be the same
// size. With client decode, a sample the client may take (hand_over) has
// each JPEG the client can decode handed over instead of decoded: only
// its header is read, and its bytes and render record are written (a JPEG
// within the limits, not CMYK, ending in its end-of-image marker, drawn no
// per-pixel effect). Encoded fields get their file's bytes, count first.
//
// Thread-safe (per-thread scratch). What it is given outlives it.
#ifndef STOKER_SERVER_SERVE_SAMPLE_RENDERER_H_
#define STOKER_SERVER_SERVE_SAMPLE_RENDERER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/dataset/dataset.h"
#include "server/pipeline/pipeline.h"
#include "server/serve/sample_reader.h"

namespace stoker {

// Where one sample's render time went.
struct RenderCost {
  uint64_t decode_ns = 0;   // Pictures: decodes, cache fills, header reads.
  uint64_t write_ns = 0;    // Rendering and writing the fields.
  bool handed_over = false; // A picture went to the client.
};

class SampleRenderer {
 public:
  // `field_bytes` as SampleReader's.
  SampleRenderer(const Dataset& dataset, const Pipeline& pipeline, const SampleReader& reader,
                 uint64_t seed, std::vector<uint64_t> field_bytes, DecodeLimits limits);

  // Renders sample `index` of `epoch` into `out`; with `spatial_out`, its
  // image and mask fields go there instead, one after another (a private
  // copy for the decoded cache). Errors are the sample's decode error and
  // name the file when it is not the sample's first: a picture that cannot
  // be decoded, or of another size than the first (DATA_LOSS), an encoded
  // file larger than its field (DATA_LOSS).
  absl::Status Render(uint64_t index, uint64_t epoch, bool hand_over, const FetchedSample& in,
                      const SampleOut& out, uint8_t* spatial_out, RenderCost* cost) const;

 private:
  // Spatial field f's file and render record written for the client
  // instead of decoding it, when the client can decode it; false when the
  // daemon must. `plan` draws the geometry into `canvases` and `effects`
  // (false: another size than the sample's).
  absl::StatusOr<bool> HandOver(size_t f, const FetchedSample& in, const SampleOut& out,
                                const std::function<bool(int, int)>& plan,
                                const std::vector<Canvas>& canvases,
                                const std::vector<Effects>& effects) const;

  const Dataset& dataset_;
  const Pipeline& pipeline_;
  const SampleReader& reader_;
  const uint64_t seed_;
  const std::vector<uint64_t> field_bytes_;
  const DecodeLimits limits_;
};

// Copies an encoded file, its byte count first (uint32), into `out`, a
// field of `field.shape[0]` bytes; DATA_LOSS when it does not fit.
absl::Status WriteEncoded(const FieldPlan& field, const std::string& bytes, uint8_t* out);

}  // namespace stoker

#endif  // STOKER_SERVER_SERVE_SAMPLE_RENDERER_H_
