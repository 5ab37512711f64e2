// End to end: a daemon (in-process, or the real stokerd binary as a
// subprocess) serving real JPEG files over gRPC on a Unix socket, read by
// the C++ client through the shared-memory ring. Pixels are checked against
// the straightforward reference in tests/reference.h.
#include <signal.h>
#include <sys/stat.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "client/cpp/client.h"
#include "client/cpp/read_summary.h"
#include "gtest/gtest.h"
#include "server/daemon/daemon.h"
#include "server/sources/files/folder.h"
#include "server/daemon/grpc_service.h"
#include "server/imaging/transform.h"
#include "shm/ring_data.h"
#include "shm/segment.h"
#include "tests/harness.h"
#include "tests/reference.h"
#include "tests/testdata.h"
#include "util/checksum.h"
#include "util/rng.h"

namespace stoker {
namespace {

namespace fs = std::filesystem;
using testing::Spawn;
using testing::TestDaemon;
using testing::WaitExit;

// 3 classes x 6 photo-like JPEGs, 4 broken files in class_01, one text file.
class E2ETest : public ::testing::TestWithParam<bool> {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(testdata::MakeTempDir("e2e-data"));
    testdata::FolderSpec spec;
    spec.classes = 3;
    spec.per_class = 6;
    spec.min_side = 60;
    spec.max_side = 140;
    spec.seed = 21;
    ASSERT_TRUE(testdata::MakeFolderDataset(*root_, spec).ok());
    ASSERT_TRUE(testdata::MakeBadFiles(*root_ + "/class_01", 5).ok());
    ASSERT_TRUE(testdata::WriteFile(*root_ + "/class_00/notes.txt", "hi").ok());
    auto ds = LoadFolderDataset(*root_);
    ASSERT_TRUE(ds.ok());
    dataset_ = new Dataset(*std::move(ds));
    ASSERT_EQ(dataset_->samples.size(), 22u);
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete root_;
    delete dataset_;
  }

  static v1::SessionSpec Spec(v1::Transform t, uint32_t batch, uint32_t size,
                              bool shuffle, uint64_t seed = 0) {
    v1::SessionSpec s;
    s.mutable_dataset()->mutable_folder()->set_path(*root_);
    s.set_transform(t);
    s.set_batch_size(batch);
    s.set_image_size(size);
    s.set_shuffle(shuffle);
    s.set_seed(seed);
    s.set_decode(v1::DECODE_FULL);  // Pixel-exact against the reference.
    s.set_on_error(v1::ON_ERROR_ZEROS);  // Failed samples stay visible.
    return s;
  }

  // Expected per-sample status for a path in the fixture.
  static uint32_t ExpectedStatus(const std::string& path) {
    if (path.find("bad_empty") != std::string::npos) return shm::kSampleReadError;
    if (path.find("bad_") != std::string::npos) return shm::kSampleDecodeError;
    return shm::kSampleOk;
  }

  // Reads `epochs` epochs and checks every sample against the reference
  // transform `ref(image, epoch, index)`.
  void ReadAndCheck(Client& client, const v1::SessionSpec& spec, int epochs,
                    const std::function<reference::Image(
                        const reference::Image&, uint64_t, uint64_t)>& ref) {
    auto session = client.OpenSession(spec);
    ASSERT_TRUE(session.ok()) << session.status();
    const uint64_t bpe = (*session)->batches_per_epoch();
    EXPECT_EQ(bpe, (22 + spec.batch_size() - 1) / spec.batch_size());
    EXPECT_EQ((*session)->info().skipped_files(), 1u);
    EXPECT_EQ((*session)->info().num_classes(), 3u);
    std::map<uint64_t, std::set<uint64_t>> seen;  // epoch -> indices
    uint64_t errors = 0;
    const size_t sample_bytes = spec.image_size() * spec.image_size() * 3;
    for (uint64_t n = 0; n < epochs * bpe; ++n) {
      auto batch = (*session)->Next(absl::Seconds(60));
      ASSERT_TRUE(batch.ok()) << batch.status();
      EXPECT_EQ(batch->epoch(), n / bpe);
      EXPECT_EQ(batch->batch_index(), n % bpe);
      EXPECT_EQ(batch->sequence(), n);
      for (uint32_t i = 0; i < batch->samples(); ++i) {
        const uint64_t idx = batch->indices()[i];
        ASSERT_LT(idx, dataset_->samples.size());
        const Sample& s = dataset_->samples[idx];
        seen[batch->epoch()].insert(idx);
        // Label = the folder's class id.
        const std::string cls = fs::path(s.path).parent_path().filename();
        EXPECT_EQ(batch->labels()[i], std::stoi(cls.substr(6)));
        EXPECT_EQ(batch->status()[i], ExpectedStatus(s.path)) << s.path;
        const uint8_t* px = batch->data() + i * sample_bytes;
        if (ExpectedStatus(s.path) != shm::kSampleOk) {
          ++errors;
          EXPECT_EQ(std::count(px, px + sample_bytes, 0),
                    static_cast<long>(sample_bytes));
          continue;
        }
        auto img = reference::DecodeFile(s.path);
        ASSERT_TRUE(img.ok());
        reference::Image want = ref(*img, batch->epoch(), idx);
        auto d = reference::Compare(px, want.rgb.data(), sample_bytes);
        EXPECT_LE(d.max_abs, 2) << s.path;
        EXPECT_LT(d.mean_abs, 0.6) << s.path;
      }
      uint32_t flagged = 0;
      for (uint32_t i = 0; i < batch->samples(); ++i) flagged += batch->status()[i] != 0;
      EXPECT_EQ(batch->error_count(), flagged);
    }
    EXPECT_EQ(errors, 4u * epochs);
    for (auto& [e, idx] : seen) EXPECT_EQ(idx.size(), 22u) << "epoch " << e;
  }

  static std::string* root_;
  static Dataset* dataset_;
};
std::string* E2ETest::root_ = nullptr;
Dataset* E2ETest::dataset_ = nullptr;

// ON_ERROR_REPLACE (the default): a failed sample's place holds another
// sample's pixels and label, flagged REPLACED with the failed index, the
// same in every run; ON_ERROR_RAISE: Next() names the file, then goes on.
TEST_P(E2ETest, FailedSamplesAreReplacedDeterministicallyOrRaised) {
  TestDaemon d(GetParam(), 2);
  auto client = d.Connect();
  ASSERT_NE(client, nullptr);
  v1::SessionSpec spec = Spec(v1::TRANSFORM_TRAIN, 4, 24, true, 9);
  spec.clear_on_error();
  std::vector<uint64_t> checksums;
  for (int run = 0; run < 2; ++run) {
    auto session = client->OpenSession(spec);
    ASSERT_TRUE(session.ok()) << session.status();
    Checksum sum;
    int replaced = 0;
    for (uint64_t n = 0; n < (*session)->batches_per_epoch(); ++n) {
      auto b = (*session)->Next(absl::Seconds(60));
      ASSERT_TRUE(b.ok()) << b.status();
      sum.Update(b->data(), b->size_bytes());
      sum.Update(b->labels(), 4 * b->samples());
      for (uint32_t i = 0; i < b->samples(); ++i) {
        const std::string& path = dataset_->samples[b->indices()[i]].path;
        if (ExpectedStatus(path) == shm::kSampleOk) {
          EXPECT_EQ(b->status()[i], shm::kSampleOk) << path;
          continue;
        }
        ++replaced;
        EXPECT_EQ(b->status()[i], shm::kSampleReplaced) << path;
        const uint8_t* px = b->data() + i * b->sample_bytes();
        EXPECT_LT(std::count(px, px + b->sample_bytes(), 0), 24 * 24 * 3 / 2)
            << "a blank image stood in for " << path;
        EXPECT_GE(b->labels()[i], 0);
        EXPECT_LT(b->labels()[i], 3);
      }
    }
    EXPECT_EQ(replaced, 4);
    checksums.push_back(sum.value());
  }
  EXPECT_EQ(checksums[0], checksums[1]);

  spec.set_on_error(v1::ON_ERROR_RAISE);
  auto session = client->OpenSession(spec);
  ASSERT_TRUE(session.ok());
  int raised = 0, delivered = 0;
  for (uint64_t n = 0; n < (*session)->batches_per_epoch(); ++n) {
    auto b = (*session)->Next(absl::Seconds(60));
    if (b.ok()) {
      EXPECT_EQ(b->error_count(), 0u);
      ++delivered;
      continue;
    }
    ++raised;
    EXPECT_EQ(b.status().code(), absl::StatusCode::kDataLoss) << b.status();
    EXPECT_NE(b.status().message().find("/bad_"), std::string::npos) << b.status();
  }
  EXPECT_GE(raised, 1);
  EXPECT_EQ(raised + delivered, static_cast<int>((*session)->batches_per_epoch()));
}

TEST_P(E2ETest, ValTwoEpochsMatchReference) {
  TestDaemon d(GetParam(), 2);
  auto client = d.Connect();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->CheckHealth().ok());
  ReadAndCheck(*client, Spec(v1::TRANSFORM_VAL, 4, 48, false), 2,
               [](const reference::Image& img, uint64_t, uint64_t) {
                 return reference::ValTransform(img, 48);
               });
  auto stats = client->GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_GE(stats->samples_failed(), 8u);
  EXPECT_GT(stats->bytes_read(), 0u);
}

TEST_P(E2ETest, TrainTwoEpochsMatchReferenceDraws) {
  TestDaemon d(GetParam(), 2);
  auto client = d.Connect();
  ASSERT_NE(client, nullptr);
  const uint64_t seed = 7;
  ReadAndCheck(*client, Spec(v1::TRANSFORM_TRAIN, 5, 40, true, seed), 2,
               [seed](const reference::Image& img, uint64_t epoch, uint64_t idx) {
                 Rng rng(MixSeed({seed, epoch, idx}));
                 CropBox b = RandomResizedCropBox(img.width, img.height, rng);
                 return reference::ResampleRegion(img, b.x, b.y, b.w, b.h, 40,
                                                  40, b.flip);
               });
}

TEST_P(E2ETest, ErrorsCarryCanonicalCodesOverGrpc) {
  TestDaemon d(GetParam(), 1);
  auto client = d.Connect();
  ASSERT_NE(client, nullptr);
  struct stat st;
  ASSERT_EQ(stat(d.socket().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);  // Owner and group may connect.
  v1::SessionSpec s = Spec(v1::TRANSFORM_VAL, 4, 32, false);
  s.mutable_dataset()->mutable_folder()->set_path("/no/such/dataset");
  auto r = client->OpenSession(s);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/no/such/dataset"), std::string::npos);
  const std::string empty = testdata::MakeTempDir("e2e-empty");
  s.mutable_dataset()->mutable_folder()->set_path(empty);
  EXPECT_EQ(client->OpenSession(s).status().code(),
            absl::StatusCode::kFailedPrecondition);
  fs::remove_all(empty);
  s = Spec(v1::TRANSFORM_VAL, 0, 32, false);
  EXPECT_EQ(client->OpenSession(s).status().code(),
            absl::StatusCode::kInvalidArgument);
  s = Spec(v1::TRANSFORM_VAL, 4, 32, false);
  s.set_rank(3);
  s.set_world_size(2);
  EXPECT_EQ(client->OpenSession(s).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client->CloseSession(12345).code(), absl::StatusCode::kNotFound);
}

TEST_P(E2ETest, SameSpecSameChecksumAnyThreadCountSeedChangesOrder) {
  auto checksum_with = [&](int threads, uint64_t seed, std::vector<uint64_t>* order) {
    TestDaemon d(GetParam(), threads);
    auto client = d.Connect();
    auto session = client->OpenSession(Spec(v1::TRANSFORM_TRAIN, 4, 32, true, seed));
    EXPECT_TRUE(session.ok()) << session.status();
    auto sum = ReadBatches(**session, 2 * (*session)->batches_per_epoch(),
                           [&](const Batch& b) {
                             for (uint32_t i = 0; i < b.samples(); ++i)
                               order->push_back(b.indices()[i]);
                           });
    EXPECT_TRUE(sum.ok()) << sum.status();
    return sum.ok() ? sum->checksum : 0;
  };
  std::vector<uint64_t> o1, o2, o3;
  const uint64_t one = checksum_with(1, 3, &o1);
  const uint64_t two = checksum_with(2, 3, &o2);
  const uint64_t other = checksum_with(2, 4, &o3);
  EXPECT_EQ(one, two);
  EXPECT_EQ(o1, o2);
  EXPECT_NE(one, other);
  EXPECT_NE(o1, o3);
}

TEST_P(E2ETest, RanksCoverTheEpoch) {
  TestDaemon d(GetParam(), 2);
  auto client = d.Connect();
  std::map<uint64_t, int> count;
  for (uint32_t r = 0; r < 3; ++r) {
    v1::SessionSpec s = Spec(v1::TRANSFORM_VAL, 3, 16, true, 11);
    s.set_rank(r);
    s.set_world_size(3);
    auto session = client->OpenSession(s);
    ASSERT_TRUE(session.ok()) << session.status();
    EXPECT_EQ((*session)->info().samples_per_epoch(), 8u);  // ceil(22/3)
    auto sum = ReadBatches(**session, (*session)->batches_per_epoch(),
                           [&](const Batch& b) {
                             for (uint32_t i = 0; i < b.samples(); ++i)
                               count[b.indices()[i]]++;
                           });
    ASSERT_TRUE(sum.ok());
  }
  EXPECT_EQ(count.size(), 22u);  // Every sample, padded by 2 repeats.
  int total = 0;
  for (auto& [i, c] : count) total += c;
  EXPECT_EQ(total, 24);
}

TEST_P(E2ETest, KilledClientsRingIsReclaimedAndDaemonServesOn) {
  TestDaemon d(GetParam(), 2);
  auto client = d.Connect();
  ASSERT_NE(client, nullptr);
  pid_t reader = Spawn({"client/cpp/stokerctl", "--socket", d.socket(), "read",
                        "--dataset", *root_, "--batch-size", "2", "--size",
                        "32", "--epochs", "1000000"});
  // Wait until the reader's session is streaming.
  bool streaming = false;
  for (int i = 0; i < 400 && !streaming; ++i) {
    auto stats = client->GetStats();
    ASSERT_TRUE(stats.ok());
    streaming = stats->sessions_size() == 1 &&
                stats->sessions(0).batches_published() > 4;
    if (!streaming) absl::SleepFor(absl::Milliseconds(25));
  }
  ASSERT_TRUE(streaming);
  ASSERT_EQ(shm::Segment::List(d.prefix(), d.pid()).size(), 1u);
  kill(reader, SIGKILL);
  EXPECT_EQ(WaitExit(reader), 128 + SIGKILL);
  const absl::Time killed = absl::Now();
  // Counted once the ring is gone (closed on a thread of its own).
  absl::StatusOr<v1::DaemonStats> stats;
  while ((stats = client->GetStats()).ok() && stats->sessions_reclaimed() == 0 &&
         absl::Now() - killed < absl::Seconds(30)) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const absl::Duration took = absl::Now() - killed;
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->sessions_reclaimed(), 1u);
  EXPECT_TRUE(shm::Segment::List(d.prefix(), d.pid()).empty());
  EXPECT_LT(took, absl::Seconds(2)) << "ring reclaimed after " << took;
  EXPECT_EQ(stats->sessions_size(), 0);
  // Still serving.
  auto session = client->OpenSession(Spec(v1::TRANSFORM_VAL, 4, 32, false));
  ASSERT_TRUE(session.ok()) << session.status();
  auto sum = ReadBatches(**session, (*session)->batches_per_epoch());
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(sum->samples, 22u);
  EXPECT_EQ(sum->errors, 4u);
}

// A client outlives its daemon: one restarted in a new folder of the same
// name (systemd's RuntimeDirectory), which knows none of its tokens, is
// connected to afresh, checked again, by the same Client object.
TEST_P(E2ETest, AClientGoesOnWithADaemonRestartedInANewFolder) {
  const std::string dir = testdata::MakeTempDir("e2e-restart");
  DaemonOptions o;
  o.decode_threads = 2;
  std::unique_ptr<Client> client;
  {
    TestDaemon first(GetParam(), o, dir);
    client = first.Connect();
    ASSERT_NE(client, nullptr);
    ASSERT_TRUE(client->GetStats().ok());
  }  // Stopped, its folder removed.
  ASSERT_FALSE(fs::exists(dir));
  TestDaemon second(GetParam(), o, dir);
  ASSERT_NE(second.Connect(), nullptr);  // It serves.
  auto session = client->OpenSession(Spec(v1::TRANSFORM_VAL, 4, 32, false));
  ASSERT_TRUE(session.ok()) << session.status();
  auto sum = ReadBatches(**session, (*session)->batches_per_epoch());
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(sum->samples, 22u);
  absl::StatusOr<v1::DaemonStats> stats = client->GetStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->sessions_opened(), 1u);  // The second daemon's.
}

// Every field, status and index of a batch's valid samples.
uint64_t BatchSum(const Batch& b) {
  Checksum c;
  for (int f = 0; f < b.field_count(); ++f) c.Update(b.field(f).data, b.field(f).size_bytes);
  c.Update(b.status(), b.samples() * sizeof(uint32_t));
  c.Update(b.indices(), b.samples() * sizeof(uint64_t));
  return c.value();
}

// An application that keeps every batch (a list of whole epochs) is
// never stalled: once it holds all slots but the one taken, each batch
// comes as a private copy, equal to the ring's, and the ring goes on.
TEST_P(E2ETest, BatchesHeldPastTheRingComeAsPrivateCopies) {
  TestDaemon d(GetParam(), 2);
  auto client = d.Connect();
  v1::SessionSpec s = Spec(v1::TRANSFORM_VAL, 2, 24, false);
  s.set_ring_slots(4);
  std::vector<uint64_t> reference;
  {
    auto session = client->OpenSession(s);
    ASSERT_TRUE(session.ok()) << session.status();
    for (uint64_t i = 0; i < 2 * (*session)->batches_per_epoch(); ++i) {
      auto b = (*session)->Next(absl::Seconds(30));
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_FALSE(b->copied());
      reference.push_back(BatchSum(*b));
    }
  }
  auto session = client->OpenSession(s);
  ASSERT_TRUE(session.ok()) << session.status();
  ::testing::internal::CaptureStderr();
  std::vector<Batch> kept;
  for (size_t i = 0; i < reference.size(); ++i) {
    auto b = (*session)->Next(absl::Seconds(30));
    ASSERT_TRUE(b.ok()) << i << ": " << b.status();
    EXPECT_EQ(b->copied(), i >= 3) << i;  // 3 held, the 4th slot is the last.
    kept.push_back(*std::move(b));
  }
  const std::string warned = ::testing::internal::GetCapturedStderr();
  for (size_t i = 0; i < kept.size(); ++i) EXPECT_EQ(BatchSum(kept[i]), reference[i]) << i;
  EXPECT_NE(warned.find("holds 3 of its 4 ring slots"), std::string::npos) << warned;
  EXPECT_EQ(warned.find("stoker:"), warned.rfind("stoker:")) << "one warning: " << warned;
  // A copy's data lie outside the ring's mapping (which callers pin once),
  // aligned as a slot's.
  const auto* base = static_cast<const uint8_t*>(kept[5].mapping_base());
  EXPECT_EQ(base, kept[0].mapping_base());
  EXPECT_TRUE(kept[5].data() < base || kept[5].data() >= base + kept[5].mapping_size());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(kept[5].data()) % 64, 0u);
  // Let go, the ring's own slots serve again.
  kept.clear();
  auto b = (*session)->Next(absl::Seconds(30));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(b->copied());
}

TEST_P(E2ETest, HeldBatchesStayIntactAndClosedSessionFailsFast) {
  TestDaemon d(GetParam(), 2);
  auto client = d.Connect();
  v1::SessionSpec s = Spec(v1::TRANSFORM_VAL, 2, 24, false);
  s.set_ring_slots(4);
  auto session = client->OpenSession(s);
  ASSERT_TRUE(session.ok());
  auto held = (*session)->Next(absl::Seconds(30));
  ASSERT_TRUE(held.ok());
  std::vector<uint8_t> copy(held->data(), held->data() + held->size_bytes());
  for (int i = 0; i < 20; ++i) {  // Cycles the other 3 slots many times.
    auto b = (*session)->Next(absl::Seconds(30));
    ASSERT_TRUE(b.ok()) << b.status();
  }
  EXPECT_TRUE(std::equal(copy.begin(), copy.end(), held->data()));
  EXPECT_EQ(held->sequence(), 0u);
  ASSERT_TRUE((*session)->Close().ok());
  EXPECT_EQ((*session)->Next(absl::Seconds(30)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(std::equal(copy.begin(), copy.end(), held->data()));

  // Closed by an operator: what is already in the ring is delivered, then
  // UNAVAILABLE, without waiting for the timeout.
  auto other = client->OpenSession(s);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->Next(absl::Seconds(30)).ok());
  ASSERT_TRUE(client->CloseSession((*other)->id()).ok());
  const absl::Time t0 = absl::Now();
  absl::Status end;
  int delivered = 0;
  while (end.ok()) {
    auto b = (*other)->Next(absl::Seconds(30));
    end = b.status();
    delivered += b.ok();
  }
  EXPECT_EQ(end.code(), absl::StatusCode::kUnavailable) << end;
  EXPECT_LE(delivered, 4);
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
}

TEST_P(E2ETest, FloatOutputsAreTheNormalizedUint8InChw) {
  if (GetParam()) GTEST_SKIP() << "same code path as in-process";
  TestDaemon d(false, 2);
  auto client = d.Connect();
  v1::SessionSpec spec = Spec(v1::TRANSFORM_TRAIN, 4, 24, true, 5);
  auto u8 = client->OpenSession(spec);
  spec.set_dtype(v1::DTYPE_FLOAT32);
  spec.add_mean(0.5f);
  spec.add_mean(0.4f);
  spec.add_mean(0.3f);
  for (float s : {0.2f, 0.25f, 0.3f}) spec.add_std(s);
  auto f32 = client->OpenSession(spec);
  spec.set_dtype(v1::DTYPE_FLOAT16);
  auto f16 = client->OpenSession(spec);
  ASSERT_TRUE(u8.ok() && f32.ok() && f16.ok());
  const float mean[3] = {0.5f, 0.4f, 0.3f}, stdv[3] = {0.2f, 0.25f, 0.3f};
  for (int n = 0; n < 3; ++n) {
    auto a = (*u8)->Next(absl::Seconds(30));
    auto b = (*f32)->Next(absl::Seconds(30));
    auto h = (*f16)->Next(absl::Seconds(30));
    ASSERT_TRUE(a.ok() && b.ok() && h.ok());
    EXPECT_EQ(b->dtype(), shm::kDTypeFloat32);
    EXPECT_EQ(b->sample_bytes(), 24u * 24u * 3u * 4u);
    EXPECT_EQ(h->sample_bytes(), 24u * 24u * 3u * 2u);
    const auto* fp = reinterpret_cast<const float*>(b->data());
    const auto* hp = reinterpret_cast<const uint16_t*>(h->data());
    double worst = 0;
    for (uint32_t i = 0; i < a->samples(); ++i) {
      ASSERT_EQ(a->indices()[i], b->indices()[i]);
      if (a->status()[i] != shm::kSampleOk) {  // Failed: all zero bytes.
        ASSERT_EQ(b->status()[i], a->status()[i]);
        EXPECT_EQ(std::count(fp + i * 3 * 576, fp + (i + 1) * 3 * 576, 0.0f), 3 * 576);
        continue;
      }
      for (int c = 0; c < 3; ++c) {
        for (int p = 0; p < 24 * 24; ++p) {
          const float want =
              (a->data()[i * a->sample_bytes() + p * 3 + c] / 255.0f - mean[c]) / stdv[c];
          const size_t at = (i * 3 + c) * 24 * 24 + p;
          worst = std::max(worst, double(std::fabs(fp[at] - want)));
          ASSERT_EQ(hp[at], FloatToHalf(fp[at]));
        }
      }
    }
    EXPECT_LT(worst, 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Daemon, E2ETest, ::testing::Values(false, true),
                         [](const auto& info) {
                           return info.param ? "Subprocess" : "InProcess";
                         });

}  // namespace
}  // namespace stoker
