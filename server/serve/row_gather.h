// Copies runs of whole samples of a typed-array source (feature rows) from
// where they lie in memory (ArraySource::RowSpans) straight into a batch:
// a run costs one pass that finds each row and one pass of copies, with
// the rows a few ahead asked for early (they are drawn at random from
// files much larger than the caches), instead of a plan, a region copy and
// a clock read per row.
//
// Used only when the pipeline takes array fields whole as stored
// (Pipeline::whole_arrays). A row it cannot copy (outside every span,
// another shape, a mapped file that gives out under the copy) ends the
// run's copied prefix; the caller reads that row the general way, which
// reports its error as that sample's.
//
// Thread-safe: Copy keeps nothing between calls. The source outlives it.
#ifndef STOKER_SERVER_SERVE_ROW_GATHER_H_
#define STOKER_SERVER_SERVE_ROW_GATHER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "server/dataset/array_source.h"
#include "server/pipeline/pipeline.h"
#include "shm/ring_data.h"

namespace stoker {

class RowGather {
 public:
  // A gather of `pipeline`'s array fields from `src` (`field_bytes`: each
  // field's bytes per sample in the batch), or null when the pipeline does
  // not take them whole or some array field has no span of its shape.
  static std::unique_ptr<RowGather> For(const ArraySource& src, const Pipeline& pipeline,
                                        const std::vector<uint64_t>& field_bytes);

  // Copies samples indices[0..n), in order, into positions 0..n-1 of each
  // array field (field f's position k at out[f] + k * field_bytes[f]),
  // converted to the field's dtype, stopping at the first it cannot copy:
  // returns how many it copied. Labels are the caller's.
  size_t Copy(const uint64_t* indices, size_t n,
              const std::array<uint8_t*, shm::kMaxFields>& out) const;

 private:
  struct Field {
    size_t index = 0;      // Into the pipeline's fields.
    uint64_t stride = 0;   // Bytes per sample in the batch.
    uint64_t elements = 0;
    ElemType from = ElemType::kUint8, to = ElemType::kUint8;
    uint64_t bytes = 0;    // A row's, as stored.
    std::vector<RowSpan> spans;  // Of the field's shape, sorted by first.
    std::vector<uint64_t> firsts;  // spans[k].first, for the search.
  };
  // Where sample i of field f lies, with whether it is mapped; null when
  // no span holds it.
  const RowSpan* Find(const Field& f, uint64_t i) const;

  std::vector<Field> fields_;
};

}  // namespace stoker

#endif  // STOKER_SERVER_SERVE_ROW_GATHER_H_
