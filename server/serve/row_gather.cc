#include "server/serve/row_gather.h"

#include <algorithm>
#include <cstring>

#include "util/mapped_read.h"

namespace stoker {
namespace {

// Rows ahead of the copy whose bytes are asked for: enough to cover a
// memory access's latency with the copies of the rows between.
constexpr size_t kAhead = 8;
// At most this much of a row is asked for early; the hardware streams the
// rest of a longer one.
constexpr uint64_t kPrefetchBytes = 2048;

void Prefetch(const uint8_t* p, uint64_t bytes) {
  for (uint64_t o = 0; o < std::min(bytes, kPrefetchBytes); o += 64) __builtin_prefetch(p + o);
}

}  // namespace

std::unique_ptr<RowGather> RowGather::For(const ArraySource& src, const Pipeline& pipeline,
                                          const std::vector<uint64_t>& field_bytes) {
  if (!pipeline.whole_arrays()) return nullptr;
  auto gather = std::unique_ptr<RowGather>(new RowGather);
  for (size_t f = 0; f < pipeline.fields().size(); ++f) {
    const FieldPlan& plan = pipeline.fields()[f];
    if (plan.kind != v1::FieldSpec::KIND_ARRAY) continue;
    Field field;
    field.index = f;
    field.stride = field_bytes[f];
    field.to = FromRingDType(plan.dtype);
    field.elements = 1;
    for (uint64_t d : plan.shape) field.elements *= d;
    for (const RowSpan& s : src.RowSpans(plan.file)) {
      // Another shape is the general path's error; another element type
      // (parts of one source share theirs) is left to it too.
      if (s.shape == nullptr || *s.shape != plan.shape || s.rows == 0) continue;
      if (!field.spans.empty() && s.type != field.spans[0].type) continue;
      if (!field.firsts.empty() && s.first < field.firsts.back()) return nullptr;
      field.spans.push_back(s);
      field.firsts.push_back(s.first);
    }
    if (field.spans.empty()) return nullptr;
    field.from = field.spans[0].type;
    field.bytes = field.elements * ElemBytes(field.from);
    gather->fields_.push_back(std::move(field));
  }
  if (gather->fields_.empty()) return nullptr;
  return gather;
}

const RowSpan* RowGather::Find(const Field& f, uint64_t i) const {
  const size_t k = std::upper_bound(f.firsts.begin(), f.firsts.end(), i) - f.firsts.begin();
  if (k == 0) return nullptr;
  const RowSpan& s = f.spans[k - 1];
  return i - s.first < s.rows ? &s : nullptr;
}

size_t RowGather::Copy(const uint64_t* indices, size_t n,
                       const std::array<uint8_t*, shm::kMaxFields>& out) const {
  const size_t nf = fields_.size();
  thread_local std::vector<const uint8_t*> from;
  from.resize(n * nf);
  bool mapped = false;
  size_t m = 0;  // Rows every field holds, from the first.
  for (; m < n; ++m) {
    size_t j = 0;
    for (; j < nf; ++j) {
      const RowSpan* s = Find(fields_[j], indices[m]);
      if (s == nullptr) break;
      from[m * nf + j] = s->data + (indices[m] - s->first) * s->row_bytes;
      mapped = mapped || s->mapped;
    }
    if (j < nf) break;
  }
  // Written per row: a fault in a mapped file leaves through siglongjmp
  // with the rows before it copied.
  volatile size_t copied = 0;
  auto copy = [&] {
    for (size_t k = 0; k < m; ++k) {
      for (size_t j = 0; j < nf; ++j) {
        const Field& f = fields_[j];
        if (k + kAhead < m) Prefetch(from[(k + kAhead) * nf + j], f.bytes);
        uint8_t* dst = out[f.index] + k * f.stride;
        if (f.from == f.to) {
          std::memcpy(dst, from[k * nf + j], f.bytes);
        } else {
          const uint64_t zero = 0;
          CopyBox(from[k * nf + j], f.from, &f.elements, &zero, &f.elements, 1, dst, f.to,
                  &f.elements, &zero);
        }
      }
      copied = k + 1;
    }
  };
  if (!mapped) {
    copy();
    return m;
  }
  // A file truncated under the copy: the rows before it stand; the caller
  // reads the rest one by one, each reporting its own error.
  (void)GuardedMappedRead("rows", copy);
  return copied;
}

}  // namespace stoker
