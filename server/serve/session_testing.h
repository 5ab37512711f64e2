// What ServingSession's tests share (testonly): the daemon's shared parts
// in small (Shared), opening a session over in-memory files (Open), its
// ring read as a client reads it (Client, Batch), in-memory pictures
// (Photos, Pngs, Files), and the checksums of whole epochs (Epochs).
#ifndef STOKER_SERVER_SERVE_SESSION_TESTING_H_
#define STOKER_SERVER_SERVE_SESSION_TESTING_H_

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/dataset/memory_source.h"
#include "server/pool/topology.h"
#include "server/serve/serving_testing.h"
#include "server/serve/session.h"
#include "tests/testdata.h"
#include "util/checksum.h"

namespace stoker {
namespace session_testing {

inline constexpr char kVal[] = R"({"transform": "TRANSFORM_VAL", "image_size": 24,
                           "dtype": "DTYPE_UINT8", "batch_size": 4})";

// What sessions share (the daemon's Engine, small): a reader pool, one
// unpinned decode pool of `threads`, the caches.
struct Shared {
  explicit Shared(int threads, uint64_t pixel_bytes = 64 << 20)
      : ram("pixels", pixel_bytes, 16, pixel_bytes / 4),
        shares(pixel_bytes),
        decode("t-dec", Topology::Single(), false, threads, false) {}
  ShardedLruCache l1{"l1", 64 << 20};
  ShardedLruCache decoded{"decoded", 64 << 20};
  ShardedLruCache ram;
  PixelShares shares;
  SampleFetcher fetcher{&l1, nullptr, 4};
  PixelCache pixels{&ram, nullptr};
  PipelineCounters counters;
  IdleWork idle;
  ThreadPool reader{"t-io", 4};
  NodePools decode;
  PipelineContext Context() {
    return PipelineContext{&reader, &decode, 0, &fetcher, &decoded, &pixels, &counters,
                           1, DecodeLimits{}, &idle, -1, &shares};
  }
};

inline absl::StatusOr<std::unique_ptr<ServingSession>> Open(
    const std::string& json, std::shared_ptr<const Dataset> ds, Shared* shared, uint64_t id,
    const std::function<absl::Status(uint64_t)>& admit = nullptr, int64_t uid = -1) {
  const v1::SessionSpec spec = SpecOf(json);
  PipelineContext ctx = shared->Context();
  ctx.uid = uid;
  return ServingSession::Create(id, spec, PipelineOf(json), getpid(), std::move(ds),
                                absl::StrCat("stoker-session-test.", getpid(), ".", id),
                                ctx, admit);
}

// One batch as the client sees it.
struct Batch {
  uint64_t epoch = 0, batch_index = 0;
  uint32_t samples = 0, errors = 0;
  std::vector<uint64_t> indices;
  std::vector<uint32_t> status;
  uint64_t checksum = 0;  // Of every field's bytes of its samples.
};

// The session's ring mapped as a client maps it; Read takes the next
// batch (waiting for it) and gives its slot back.
class Client {
 public:
  explicit Client(const ServingSession& s) {
    absl::StatusOr<int> fd = s.ring().Share();
    EXPECT_TRUE(fd.ok()) << fd.status();
    auto ring = shm::RingConsumer::Open(*fd, s.ring().name(), s.id());
    close(*fd);
    EXPECT_TRUE(ring.ok()) << ring.status();
    ring_ = *std::move(ring);
  }
  absl::StatusOr<Batch> Read(absl::Duration timeout = absl::Seconds(60)) {
    shm::SlotSnapshot snap;
    absl::StatusOr<int> slot = ring_->Acquire(next_, timeout, nullptr, &snap);
    if (!slot.ok()) return slot.status();
    ++next_;
    const shm::SlotView v = ring_->Slot(*slot);
    Batch b;
    b.epoch = snap.epoch;
    b.batch_index = snap.batch_index;
    b.samples = snap.sample_count;
    b.errors = snap.error_count;
    b.indices.assign(v.indices, v.indices + b.samples);
    b.status.assign(v.status, v.status + b.samples);
    Checksum sum;
    for (uint32_t f = 0; f < ring_->layout().field_count; ++f) {
      const uint64_t n = ring_->layout().fields[f].sample_bytes;
      if (std::string(ring_->layout().fields[f].name) != "raw") {
        sum.Update(v.fields[f], b.samples * n);
        continue;
      }
      // An encoded field: its length, then that many bytes of the file (the
      // rest of the slot is whatever it held).
      for (uint32_t i = 0; i < b.samples; ++i) {
        const uint8_t* p = v.fields[f] + i * n;
        uint32_t len = 0;
        std::memcpy(&len, p, 4);
        sum.Update(p, 4 + std::min<uint64_t>(len, n - 4));
      }
    }
    b.checksum = sum.value();
    ring_->Release(*slot);
    return b;
  }
  uint32_t close_reason() const { return ring_->close_reason(); }

 private:
  std::unique_ptr<shm::RingConsumer> ring_;
  uint64_t next_ = 0;
};

// `n` photo-like JPEGs, "p<i>.jpg", of differing sizes.
inline std::shared_ptr<MemorySource> Photos(int n) {
  auto src = std::make_shared<MemorySource>("root");
  for (int i = 0; i < n; ++i) {
    const int w = 40 + 4 * i, h = 32 + 2 * i;
    absl::StatusOr<std::string> j =
        testdata::EncodeJpeg(testdata::PhotoLikeRgb(w, h, 100 + i), w, h, 90);
    EXPECT_TRUE(j.ok());
    src->Put(absl::StrCat("p", i, ".jpg"), *j);
  }
  return src;
}

// PNGs "p<i>.png" of source `name`: the same pictures as Photos by
// default; picture i is (w + dw * i) x (h + dh * i), drawn from seed + i.
inline std::shared_ptr<MemorySource> Pngs(int n, int w = 40, int dw = 4, int h = 32, int dh = 2,
                                          uint64_t seed = 100, const char* name = "root") {
  auto src = std::make_shared<MemorySource>(name);
  for (int i = 0; i < n; ++i) {
    const int pw = w + dw * i, ph = h + dh * i;
    absl::StatusOr<std::string> p = testdata::EncodePng(testdata::PhotoLikeRgb(pw, ph, seed + i),
                                                        pw, ph, testdata::PngKind::kRgb8);
    EXPECT_TRUE(p.ok());
    src->Put(absl::StrCat("p", i, ".png"), *p);
  }
  return src;
}

inline std::vector<std::vector<std::string>> Files(int n, const char* suffix = ".jpg") {
  std::vector<std::vector<std::string>> files;
  for (int i = 0; i < n; ++i) files.push_back({absl::StrCat("p", i, suffix)});
  return files;
}

// Checksums of `epochs` epochs of `json` over `src`, and the session's
// stats at the end (session `id` of `uid`).
inline std::vector<uint64_t> Epochs(const std::string& json, std::shared_ptr<MemorySource> src,
                             const char* suffix, int n, int epochs, Shared* shared,
                             v1::SessionStats* stats, uint64_t id = 1, int64_t uid = -1) {
  auto s = Open(json, MemoryDataset(src, Files(n, suffix)), shared, id, nullptr, uid);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return {};
  Client client(**s);
  (*s)->Start();
  std::vector<uint64_t> sums;
  const int batches = epochs * ((n + 3) / 4);
  for (int k = 0; k < batches; ++k) {
    absl::StatusOr<Batch> b = client.Read();
    EXPECT_TRUE(b.ok()) << b.status();
    if (!b.ok()) break;
    sums.push_back(b->checksum);
  }
  *stats = (*s)->Stats();
  return sums;
}

}  // namespace session_testing
}  // namespace stoker

#endif  // STOKER_SERVER_SERVE_SESSION_TESTING_H_
