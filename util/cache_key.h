// Cache keys built from typed parts, never joined strings: each part is
// written as its length and its bytes, so no part (an HDF5 dataset's name,
// a path) can hold a separator that makes two keys one. Header-only; no
// state.
#ifndef STOKER_UTIL_CACHE_KEY_H_
#define STOKER_UTIL_CACHE_KEY_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace stoker {

// One part of a key: text or a number.
class KeyPart {
 public:
  KeyPart(absl::string_view text) : text_(text) {}  // NOLINT: implicit by design.
  KeyPart(const std::string& text) : text_(text) {}  // NOLINT
  KeyPart(const char* text) : text_(text) {}  // NOLINT
  KeyPart(uint64_t n) : text_(absl::StrCat(n)) {}  // NOLINT
  KeyPart(int64_t n) : text_(absl::StrCat(n)) {}  // NOLINT
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// "<length>:<bytes>" for each part, in order.
inline std::string CacheKey(std::initializer_list<KeyPart> parts) {
  std::string key;
  for (const KeyPart& p : parts) absl::StrAppend(&key, p.text().size(), ":", p.text());
  return key;
}

}  // namespace stoker

#endif  // STOKER_UTIL_CACHE_KEY_H_
