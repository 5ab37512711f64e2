// The foreground of a label array (a segmentation volume): which of its
// elements are set (!= 0, NaN included; -0.0 is not), as the row-major
// offsets of those elements, for label-biased patches. A patch is then
// centred on a voxel drawn from the foreground with probability
// pos / (pos + neg), else from the background, as MONAI's
// RandCropByPosNegLabel draws (server/ops/random_patch.cc).
//
// An index is built once per label array (a Builder fed its elements in
// order) and kept as one immutable Buffer beside the decoded
// volume, so it is counted in the volume cache's budget: 4 bytes per
// foreground element (8 for arrays of more than 2^32 elements). The
// background is never listed: its k-th element is found from the sorted
// foreground by binary search.
//
// Immutable; thread-safe.
#ifndef STOKER_SERVER_IMAGING_FOREGROUND_H_
#define STOKER_SERVER_IMAGING_FOREGROUND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "util/buffer.h"
#include "util/rng.h"

namespace stoker {

class Foreground {
 public:
  // Appends elements in row-major order; Finish once all `elements` have
  // been added.
  class Builder {
   public:
    explicit Builder(uint64_t elements);
    // The next n elements: element k is set when set(k).
    template <typename IsSet>
    void Add(uint64_t n, IsSet set) {
      for (uint64_t k = 0; k < n; ++k) {
        if (set(k)) Append(next_ + k);
      }
      next_ += n;
    }
    // The index (elements added must equal the constructor's).
    Foreground Finish();

   private:
    void Append(uint64_t offset);
    uint64_t elements_, next_ = 0, count_ = 0;
    bool wide_;
    std::string out_;
  };

  Foreground() = default;
  // An index as Builder::Finish encoded it (bytes()).
  explicit Foreground(Buffer bytes);

  const Buffer& bytes() const { return bytes_; }
  uint64_t elements() const { return elements_; }
  uint64_t count() const { return count_; }  // Set elements.
  // The offset of the k-th set element (k < count()).
  uint64_t Positive(uint64_t k) const;
  // The offset of the k-th unset element (k < elements() - count()).
  uint64_t Negative(uint64_t k) const;
  // One offset drawn as RandCropByPosNegLabel does: set with probability
  // `pos_ratio`, else unset, each uniformly; from the one kind there is when
  // the other is empty. An index of no elements: 0.
  uint64_t Draw(Rng& rng, double pos_ratio) const;

 private:
  uint64_t At(uint64_t j) const;
  Buffer bytes_;
  uint64_t elements_ = 0, count_ = 0;
  bool wide_ = false;
  const char* offsets_ = nullptr;
};

}  // namespace stoker

#endif  // STOKER_SERVER_IMAGING_FOREGROUND_H_
