// ServingSession over in-memory sources and its own ring, read the way a
// client reads it: batches in plan order across epochs, the same bytes for
// any pool size, failed samples replaced or zeroed as the spec says, the
// admission check before any allocation, and Stop with reads in flight
// or queued behind its user's cap.
// (Its pixel cache: session_pixels_test.)
#include "server/serve/session.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/dataset/dataset_growth.h"
#include "server/serve/session_testing.h"

namespace stoker {
namespace {

using namespace session_testing;  // NOLINT: the tests' own helpers.

TEST(ServingSessionTest, BatchesComeInPlanOrderAcrossEpochs) {
  Shared shared(2);
  auto s = Open(kVal, MemoryDataset(Photos(10), Files(10)), &shared, 1);
  ASSERT_TRUE(s.ok()) << s.status();
  Client client(**s);
  (*s)->Start();
  // 10 samples in batches of 4: 4, 4, 2, then epoch 1 the same.
  for (uint64_t seq = 0; seq < 6; ++seq) {
    absl::StatusOr<Batch> b = client.Read();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->epoch, seq / 3);
    EXPECT_EQ(b->batch_index, seq % 3);
    ASSERT_EQ(b->samples, seq % 3 == 2 ? 2u : 4u);
    EXPECT_EQ(b->errors, 0u);
    for (uint32_t i = 0; i < b->samples; ++i) {
      EXPECT_EQ(b->indices[i], (seq % 3) * 4 + i);  // No shuffle: identity order.
      EXPECT_EQ(b->status[i], shm::kSampleOk);
    }
  }
  EXPECT_GE((*s)->samples_decoded(), 20u);
  const v1::SessionStats stats = (*s)->Stats();
  EXPECT_GE(stats.batches_published(), 6u);
  EXPECT_EQ(stats.samples_failed(), 0u);
}

TEST(ServingSessionTest, AStreamedDatasetGivesTheBytesOfTheWholeOne) {
  // 11 pictures in windows of 1, 2, 8; batches of 2, shuffled, with a
  // picture that fails (replaced from its window).
  const std::string train = R"({"transform": "TRANSFORM_TRAIN", "image_size": 24,
                                "dtype": "DTYPE_UINT8", "batch_size": 2, "shuffle": true,
                                "seed": 5, "on_error": "ON_ERROR_REPLACE"})";
  const std::vector<uint64_t> windows = {1, 2, 8};
  auto src = Photos(11);
  src->Put("p7.jpg", "not a picture");
  Shared shared(2);
  auto whole = MemoryDataset(src, Files(11));
  whole->first_epoch_windows = windows;
  std::vector<uint64_t> want;
  {
    auto s = Open(train, whole, &shared, 1);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ((*s)->order().batches_per_epoch(), 6u);
    Client client(**s);
    (*s)->Start();
    for (int k = 0; k < 12; ++k) {
      absl::StatusOr<Batch> b = client.Read();
      ASSERT_TRUE(b.ok()) << b.status();
      want.push_back(b->checksum);
    }
  }
  auto streamed = std::make_shared<Dataset>(*whole);
  streamed->samples.clear();
  streamed->first_epoch_windows.clear();
  streamed->growth = std::make_shared<DatasetGrowth>(11, windows.size());
  DatasetGrowth* g = streamed->growth.get();
  auto s = Open(train, streamed, &shared, 2);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->order().batches_per_epoch(), 0u);
  Client client(**s);
  (*s)->Start();
  // The first two windows make one batch; the third is published once it
  // was delivered, then the end.
  uint64_t i = 0;
  for (uint64_t w = 0; w < 2; ++w) {
    for (uint64_t k = 0; k < windows[w]; ++k, ++i) ASSERT_TRUE(g->Append(whole->samples[i]).ok());
    g->PublishWindow();
  }
  std::vector<uint64_t> got;
  absl::StatusOr<Batch> b = client.Read();
  ASSERT_TRUE(b.ok()) << b.status();
  got.push_back(b->checksum);
  EXPECT_EQ((*s)->ring().BatchesPerEpoch(), 0u);
  for (; i < 11; ++i) ASSERT_TRUE(g->Append(whole->samples[i]).ok());
  g->PublishWindow();
  g->Finish(absl::OkStatus(), 11);
  for (int k = 1; k < 12; ++k) {
    b = client.Read();
    ASSERT_TRUE(b.ok()) << b.status();
    got.push_back(b->checksum);
    // In the header before any batch past what the windows hold: batches
    // 1-4 ((b + 1) x 2 <= 11) may still come from them, batch 5 may not.
    if (k >= 5) EXPECT_EQ((*s)->ring().BatchesPerEpoch(), 6u) << k;
  }
  EXPECT_EQ(got, want);
  EXPECT_GE((*s)->Stats().samples_failed(), 1u);
}

TEST(ServingSessionTest, AStreamedOpeningsErrorClosesTheRingAfterItsBatches) {
  auto src = Photos(6);
  Shared shared(1);
  auto ds = MemoryDataset(src, Files(6));
  const std::vector<Sample> samples = ds->samples;
  ds->samples.clear();
  ds->growth = std::make_shared<DatasetGrowth>(6, 3);
  auto s = Open(kVal, ds, &shared, 1);  // Batches of 4.
  ASSERT_TRUE(s.ok()) << s.status();
  Client client(**s);
  (*s)->Start();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(ds->growth->Append(samples[i]).ok());
  ds->growth->PublishWindow();
  ds->growth->Finish(absl::DataLossError("shard 2 changed"));
  absl::StatusOr<Batch> b = client.Read();
  ASSERT_TRUE(b.ok()) << b.status();  // The published windows' batch.
  EXPECT_EQ(b->samples, 4u);
  EXPECT_EQ(client.Read().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(client.close_reason(), shm::kClosedByError);
}

TEST(ServingSessionTest, TheBytesDoNotDependOnThePoolsOrTheCaches) {
  const std::string train = R"({"transform": "TRANSFORM_TRAIN", "image_size": 24,
                                "dtype": "DTYPE_UINT8", "batch_size": 4, "shuffle": true,
                                "seed": 11})";
  std::vector<uint64_t> want;
  for (int threads : {1, 3}) {
    Shared shared(threads);
    auto src = Photos(9);
    std::vector<uint64_t> got;
    // Twice over the same shared caches: the second session reads L1.
    for (uint64_t id : {1, 2}) {
      auto s = Open(train, MemoryDataset(src, Files(9)), &shared, id);
      ASSERT_TRUE(s.ok()) << s.status();
      Client client(**s);
      (*s)->Start();
      std::vector<uint64_t> sums;
      for (int k = 0; k < 6; ++k) {  // Two epochs.
        absl::StatusOr<Batch> b = client.Read();
        ASSERT_TRUE(b.ok()) << b.status();
        sums.push_back(b->checksum);
      }
      (*s)->Stop(shm::kClosedBySession);
      if (got.empty()) {
        got = sums;
      } else {
        EXPECT_EQ(sums, got) << "threads " << threads << ", session " << id;
      }
    }
    EXPECT_NE(got[0], got[3]) << "epoch 1 draws new crops";
    if (want.empty()) {
      want = got;
    } else {
      EXPECT_EQ(got, want) << "threads " << threads;
    }
  }
}

TEST(ServingSessionTest, FailedSamplesAreReplacedOrZeroedAsTheSpecSays) {
  auto src = Photos(8);
  std::vector<std::vector<std::string>> files = Files(8);
  files[5] = {"missing.jpg"};
  src->Put("broken.jpg", "not a picture");
  files[6] = {"broken.jpg"};
  for (const char* on_error : {"ON_ERROR_REPLACE", "ON_ERROR_ZEROS"}) {
    Shared shared(2);
    const std::string json = absl::StrCat(R"({"transform": "TRANSFORM_VAL", "image_size": 24,
        "dtype": "DTYPE_UINT8", "batch_size": 4, "on_error": ")", on_error, R"("})");
    auto s = Open(json, MemoryDataset(src, files), &shared, 1);
    ASSERT_TRUE(s.ok()) << s.status();
    Client client(**s);
    (*s)->Start();
    ASSERT_TRUE(client.Read().ok());
    absl::StatusOr<Batch> b = client.Read();  // Samples 4..7.
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_EQ(b->samples, 4u);
    EXPECT_EQ(b->errors, 2u) << on_error;
    EXPECT_EQ(b->indices[1], 5u);  // The failed sample's index, either way.
    EXPECT_EQ(b->indices[2], 6u);
    if (std::string(on_error) == "ON_ERROR_REPLACE") {
      EXPECT_EQ(b->status[1], shm::kSampleReplaced);
      EXPECT_EQ(b->status[2], shm::kSampleReplaced);
    } else {
      EXPECT_EQ(b->status[1], shm::kSampleReadError);
      EXPECT_EQ(b->status[2], shm::kSampleDecodeError);
    }
    EXPECT_EQ(b->status[0], shm::kSampleOk);
    EXPECT_EQ(b->status[3], shm::kSampleOk);
    // Counted where they failed (the producer may be an epoch ahead).
    EXPECT_GE(shared.counters.samples_failed_read.load(), 1u) << on_error;
    EXPECT_GE(shared.counters.samples_failed_decode.load(), 1u) << on_error;
  }
}

TEST(ServingSessionTest, AdmissionIsAskedBeforeTheRingExists) {
  Shared shared(1);
  uint64_t asked = 0;
  auto refused = Open(kVal, MemoryDataset(Photos(4), Files(4)), &shared, 7,
                      [&](uint64_t bytes) {
                        asked = bytes;
                        return absl::ResourceExhaustedError("over the quota");
                      });
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_GT(asked, 0u);
  // The same session admitted: its ring is the size that was asked about.
  auto s = Open(kVal, MemoryDataset(Photos(4), Files(4)), &shared, 7,
                [](uint64_t) { return absl::OkStatus(); });
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->ring().layout().segment_bytes, asked);
}

TEST(ServingSessionTest, StopWaitsForReadsInFlightAndTellsTheClient) {
  Shared shared(2);
  auto src = Photos(8);
  auto s = Open(kVal, MemoryDataset(src, Files(8)), &shared, 1);
  ASSERT_TRUE(s.ok()) << s.status();
  Client client(**s);
  src->Hold();  // Every read waits until Release.
  (*s)->Start();
  src->Holding().WaitForNotification();  // A read is in flight.
  std::atomic<bool> released{false}, released_when_stopped{false};
  absl::Notification stopped;
  std::thread stopper([&] {
    (*s)->Stop(shm::kClosedByShutdown);
    released_when_stopped = released.load();
    stopped.Notify();
  });
  // Stop cannot return while the read it waits for is held: not within
  // a while (a correct Stop never does), and never before the release.
  EXPECT_FALSE(stopped.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  released = true;
  src->Release();
  stopper.join();
  EXPECT_TRUE(released_when_stopped.load());
  const int reads = src->reads();
  absl::StatusOr<Batch> b;
  while ((b = client.Read(absl::Seconds(5))).ok()) {
  }
  EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable) << b.status();
  EXPECT_EQ(client.close_reason(), shm::kClosedByShutdown);
  EXPECT_EQ(src->reads(), reads);  // Nothing runs after Stop returned.
}

// A session of a user whose reader threads are all held (here by its
// other session's read) stops at once: its queued reads, which would wait
// for the cap only to do nothing, are taken back, and none of them reads.
TEST(ServingSessionTest, StopDoesNotWaitForItsUsersCappedThreads) {
  Shared shared(2);
  shared.reader.SetUserCap(1);
  constexpr int64_t kUid = 1000;
  auto held = Photos(8);
  auto a = Open(kVal, MemoryDataset(held, Files(8)), &shared, 1, nullptr, kUid);
  ASSERT_TRUE(a.ok()) << a.status();
  Client client_a(**a);
  held->Hold();
  (*a)->Start();
  held->Holding().WaitForNotification();  // The user's one thread is held.
  auto other = Photos(8);
  auto b = Open(kVal, MemoryDataset(other, Files(8)), &shared, 2, nullptr, kUid);
  ASSERT_TRUE(b.ok()) << b.status();
  Client client_b(**b);
  (*b)->Start();
  // Both rings' slots claimed, a read a sample each, all queued but the one held.
  const size_t queued =
      4 * ((*a)->ring().layout().slot_count + (*b)->ring().layout().slot_count) - 1;
  for (int i = 0; i < 6000 && shared.reader.queued() < queued; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(shared.reader.queued(), queued);
  absl::Notification stopped;
  std::thread stopper([&] {
    (*b)->Stop(shm::kClosedBySession);
    stopped.Notify();
  });
  EXPECT_TRUE(stopped.WaitForNotificationWithTimeout(absl::Seconds(60)));
  held->Release();
  stopper.join();
  EXPECT_EQ(other->reads(), 0);
  EXPECT_EQ(client_b.Read(absl::Seconds(5)).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(client_b.close_reason(), shm::kClosedBySession);
  absl::StatusOr<Batch> first = client_a.Read();  // A goes on.
  EXPECT_TRUE(first.ok()) << first.status();
}

}  // namespace
}  // namespace stoker
