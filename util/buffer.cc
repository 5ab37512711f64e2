#include "util/buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace stoker {
namespace {

struct Owned {
  explicit Owned(std::string s) : bytes(std::move(s)), view(bytes) {}
  std::string bytes;
  std::string_view view;
};

struct Shared {
  explicit Shared(std::shared_ptr<const std::string> s) : bytes(std::move(s)), view(*bytes) {}
  std::shared_ptr<const std::string> bytes;
  std::string_view view;
};

struct Mapped {
  Mapped(void* p, size_t n) : base(p), view(static_cast<const char*>(p), n) {}
  ~Mapped() {
    if (!view.empty()) munmap(base, view.size());
  }
  Mapped(const Mapped&) = delete;
  Mapped& operator=(const Mapped&) = delete;
  void* base;
  std::string_view view;
};

}  // namespace

Buffer BufferOf(std::string s) {
  auto owned = std::make_shared<const Owned>(std::move(s));
  return Buffer(owned, &owned->view);
}

Buffer BufferOf(std::shared_ptr<const std::string> s) {
  auto shared = std::make_shared<const Shared>(std::move(s));
  return Buffer(shared, &shared->view);
}

absl::StatusOr<WritablePages> Pages(uint64_t bytes, bool huge) {
  if (bytes == 0) return WritablePages{BufferOf(std::string()), nullptr};
  if (bytes > SIZE_MAX / 2) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot map ", bytes, " bytes"));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot map ", bytes, " bytes: ", std::strerror(errno)));
  }
  if (huge) madvise(p, bytes, MADV_HUGEPAGE);  // Advice: the kernel may decline.
  auto mapped = std::make_shared<const Mapped>(p, bytes);
  return WritablePages{Buffer(mapped, &mapped->view), static_cast<uint8_t*>(p)};
}

}  // namespace stoker
