#include "server/imaging/foreground.h"

#include <cstring>
#include <utility>

namespace stoker {
namespace {

constexpr size_t kHeader = 2 * sizeof(uint64_t);  // elements, count.

bool Wide(uint64_t elements) { return elements > (uint64_t{1} << 32); }

}  // namespace

Foreground::Builder::Builder(uint64_t elements)
    : elements_(elements), wide_(Wide(elements)), out_(kHeader, '\0') {}

void Foreground::Builder::Append(uint64_t offset) {
  ++count_;
  if (wide_) {
    out_.append(reinterpret_cast<const char*>(&offset), sizeof(offset));
  } else {
    const uint32_t narrow = static_cast<uint32_t>(offset);
    out_.append(reinterpret_cast<const char*>(&narrow), sizeof(narrow));
  }
}

Foreground Foreground::Builder::Finish() {
  std::memcpy(&out_[0], &elements_, sizeof(uint64_t));
  std::memcpy(&out_[sizeof(uint64_t)], &count_, sizeof(uint64_t));
  out_.shrink_to_fit();
  return Foreground(BufferOf(std::move(out_)));
}

Foreground::Foreground(Buffer bytes) : bytes_(std::move(bytes)) {
  if (bytes_ == nullptr || bytes_->size() < kHeader) return;
  std::memcpy(&elements_, bytes_->data(), sizeof(uint64_t));
  std::memcpy(&count_, bytes_->data() + sizeof(uint64_t), sizeof(uint64_t));
  wide_ = Wide(elements_);
  offsets_ = bytes_->data() + kHeader;
}

uint64_t Foreground::At(uint64_t j) const {
  if (wide_) {
    uint64_t v;
    std::memcpy(&v, offsets_ + j * sizeof(v), sizeof(v));
    return v;
  }
  uint32_t v;
  std::memcpy(&v, offsets_ + j * sizeof(v), sizeof(v));
  return v;
}

uint64_t Foreground::Positive(uint64_t k) const { return At(k); }

uint64_t Foreground::Negative(uint64_t k) const {
  // Before set element j lie At(j) - j unset ones: the k-th unset element
  // follows the first j set elements with At(j) - j > k, at k + j.
  uint64_t lo = 0, hi = count_;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (At(mid) - mid > k) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return k + lo;
}

uint64_t Foreground::Draw(Rng& rng, double pos_ratio) const {
  const uint64_t unset = elements_ - count_;
  if (count_ == 0) pos_ratio = 0;
  if (unset == 0) pos_ratio = 1;
  if (elements_ == 0) return 0;
  return rng.Uniform01() < pos_ratio ? Positive(rng.Below(count_)) : Negative(rng.Below(unset));
}

}  // namespace stoker
