// Buffers over strings and over mapped pages: their bytes, their lifetime,
// and pages that read as zeros until written.
#include "util/buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(BufferTest, AStringsBytesStayWhileAReaderHoldsThem) {
  Buffer b = BufferOf(std::string("volume bytes"));
  Buffer reader = b;
  b.reset();
  EXPECT_EQ(*reader, "volume bytes");
  EXPECT_EQ(reader->size(), 12u);
  // Over a shared string: the same bytes, not a copy.
  auto shared = std::make_shared<const std::string>("shared bytes");
  const Buffer over = BufferOf(shared);
  EXPECT_EQ(over->data(), shared->data());
  shared.reset();
  EXPECT_EQ(*over, "shared bytes");
}

// Whether the page holding p is resident (mincore).
bool Resident(const uint8_t* p) {
  const long page = sysconf(_SC_PAGESIZE);
  void* base = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) & ~(page - 1));
  unsigned char in = 0;
  EXPECT_EQ(mincore(base, page, &in), 0);
  return in & 1;
}

TEST(BufferTest, PagesAreZeroAndTouchedOnlyWhereWritten) {
  constexpr uint64_t kBytes = 64 << 20;
  absl::StatusOr<WritablePages> p = Pages(kBytes, /*huge=*/false);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->buffer->size(), kBytes);
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(p->buffer->data()), p->data);
  // Written by 4 threads, each its own quarter's first half.
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] { std::memset(p->data + t * (kBytes / 4), t + 1, kBytes / 8); });
  }
  for (std::thread& w : writers) w.join();
  for (int t = 0; t < 4; ++t) {
    const uint8_t* q = p->data + t * (kBytes / 4);
    EXPECT_EQ(q[0], t + 1);
    EXPECT_EQ(q[kBytes / 8 - 1], t + 1);
    EXPECT_TRUE(Resident(q));
    // The unwritten half was never faulted in.
    EXPECT_FALSE(Resident(q + kBytes / 8 + (4 << 20)));
  }
  // Reading an unwritten page gives zeros.
  EXPECT_EQ(p->data[kBytes - 1], 0);
}

TEST(BufferTest, MappedPagesLiveAsLongAsTheirLastReader) {
  absl::StatusOr<WritablePages> p = Pages(1 << 20, /*huge=*/true);
  ASSERT_TRUE(p.ok());
  std::memset(p->data, 7, 1 << 20);
  Buffer reader = p->buffer;
  p->buffer.reset();
  EXPECT_EQ(reader->at((1 << 20) - 1), 7);
  EXPECT_EQ(*Pages(0, false)->buffer, "");
}

TEST(BufferTest, PagesThatCannotBeMappedAreResourceExhausted) {
  EXPECT_EQ(Pages(~uint64_t{0}, false).status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace stoker
