// Immutable byte buffers shared by their readers: a decoded volume, an
// index kept beside it, a dataset held in RAM. A Buffer is a view of bytes
// that stays valid while any reader holds it, whatever owns the bytes (a
// string, or pages mapped here), so caches can keep and hand out either.
//
// Pages(bytes) maps anonymous zero pages that are not touched until
// written. A large volume filled by several threads is then faulted in by
// those threads, in parallel and only where they write, instead of being
// zeroed first by one thread (as std::string's resize does) and written
// again. Its writer fills it through `data` before anyone else reads it;
// readers never write.
//
// Thread-safe as shared_ptr is; the bytes are immutable once published.
#ifndef STOKER_UTIL_BUFFER_H_
#define STOKER_UTIL_BUFFER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace stoker {

using Buffer = std::shared_ptr<const std::string_view>;

// A buffer owning `s`.
Buffer BufferOf(std::string s);
// A buffer sharing `s` (no copy).
Buffer BufferOf(std::shared_ptr<const std::string> s);

// `bytes` zero bytes in anonymous pages, mapped but not yet touched, and
// where to fill them. With `huge`, transparent huge pages are asked for
// (one fault per 2 MiB, for buffers that will be written whole).
struct WritablePages {
  Buffer buffer;
  uint8_t* data = nullptr;
};
// RESOURCE_EXHAUSTED when they cannot be mapped.
absl::StatusOr<WritablePages> Pages(uint64_t bytes, bool huge);

}  // namespace stoker

#endif  // STOKER_UTIL_BUFFER_H_
