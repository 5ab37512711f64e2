// The gRPC-free core, in-process: validation, session lifecycle, reclaim.
#include "server/daemon/daemon.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/daemon/ring_testing.h"
#include "server/access/fault_injecting_file_system.h"
#include "server/access/root_testing.h"
#include "shm/ring.h"
#include "tests/testdata.h"
#include "server/cache/l2_cache_testing.h"

namespace stoker {
namespace {

class DaemonTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(testdata::MakeTempDir("daemon"));
    testdata::FolderSpec fs;
    fs.classes = 2;
    fs.per_class = 5;
    fs.min_side = 40;
    fs.max_side = 90;
    ASSERT_TRUE(testdata::MakeFolderDataset(*root_, fs).ok());
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*root_);
    delete root_;
  }
  void SetUp() override {
    DaemonOptions o;
    o.decode_threads = 2;
    o.shm_prefix = absl::StrCat("stoker-dt", getpid(), ".");
    prefix_ = o.shm_prefix;
    daemon_ = std::make_unique<Daemon>(o);
    ASSERT_TRUE(daemon_->Start().ok());
  }
  void TearDown() override {
    daemon_.reset();
    EXPECT_TRUE(shm::Segment::List(prefix_).empty());
  }

  v1::OpenSessionRequest Request() {
    v1::OpenSessionRequest r;
    v1::SessionSpec* s = r.mutable_spec();
    s->mutable_dataset()->mutable_folder()->set_path(*root_);
    s->set_batch_size(3);
    s->set_transform(v1::TRANSFORM_VAL);
    s->set_image_size(32);
    return r;
  }

  static std::string* root_;
  std::string prefix_;
  std::unique_ptr<Daemon> daemon_;
};
std::string* DaemonTest::root_ = nullptr;

TEST_F(DaemonTest, InvalidSpecsAreRejectedNamingTheField) {
  struct Case {
    std::function<void(v1::SessionSpec*)> edit;
    absl::StatusCode code;
    const char* words;
  };
  const Case cases[] = {
      {[](auto* s) { s->set_batch_size(0); }, absl::StatusCode::kInvalidArgument, "batch_size"},
      {[](auto* s) { s->set_image_size(0); }, absl::StatusCode::kInvalidArgument, "image_size"},
      {[](auto* s) { s->set_rank(2); s->set_world_size(2); },
       absl::StatusCode::kInvalidArgument, "rank"},
      {[](auto* s) { s->set_ring_slots(100000); }, absl::StatusCode::kInvalidArgument, "ring_slots"},
      {[](auto* s) { s->set_batch_size(65536); s->set_image_size(4096); s->set_ring_slots(4); },
       absl::StatusCode::kInvalidArgument, "exceeds"},
      {[](auto* s) { s->set_transform(v1::TRANSFORM_UNSPECIFIED); },
       absl::StatusCode::kInvalidArgument, "transform"},
      {[](auto* s) { s->mutable_dataset()->mutable_folder()->set_path("/no/such/stoker/dir"); },
       absl::StatusCode::kNotFound, "/no/such/stoker/dir"},
      {[](auto* s) { s->mutable_dataset()->clear_source(); },
       absl::StatusCode::kInvalidArgument, "dataset needs a source"},
      {[](auto* s) { s->set_batch_size(11); s->set_drop_last(true); },
       absl::StatusCode::kFailedPrecondition, "no complete batch"},
  };
  for (const Case& c : cases) {
    v1::OpenSessionRequest r = Request();
    c.edit(r.mutable_spec());
    auto resp = daemon_->OpenSession(r);
    EXPECT_EQ(resp.status().code(), c.code) << c.words << ": " << resp.status();
    EXPECT_NE(resp.status().message().find(c.words), std::string::npos)
        << resp.status();
  }
  EXPECT_EQ(daemon_->GetStats().sessions_opened(), 0u);
  EXPECT_TRUE(shm::Segment::List(prefix_).empty());  // Nothing left behind.
}

TEST_F(DaemonTest, OpenReadCloseAndStats) {
  auto resp = daemon_->OpenSession(Request());
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->dataset_samples(), 10u);
  EXPECT_EQ(resp->num_classes(), 2u);
  EXPECT_EQ(resp->batches_per_epoch(), 4u);  // 3+3+3+1
  EXPECT_EQ(shm::Segment::List(prefix_),
            std::vector<std::string>{resp->ring().shm_name()});
  auto ring = TakeRing(*daemon_, *resp);
  ASSERT_TRUE(ring.ok()) << ring.status();
  for (uint64_t seq = 0; seq < 6; ++seq) {  // Across the epoch boundary.
    auto slot = (*ring)->Acquire(seq, absl::Seconds(30), nullptr);
    ASSERT_TRUE(slot.ok()) << slot.status();
    shm::SlotView v = (*ring)->Slot(*slot);
    EXPECT_EQ(v.control->epoch, seq / 4);
    EXPECT_EQ(v.control->batch_index, seq % 4);
    EXPECT_EQ(v.control->sample_count, seq % 4 == 3 ? 1u : 3u);
    EXPECT_EQ(v.control->error_count, 0u);
    EXPECT_EQ(v.indices[0], (seq % 4) * 3);  // No shuffle: identity order.
    (*ring)->Release(*slot);
  }
  v1::DaemonStats stats = daemon_->GetStats();
  ASSERT_EQ(stats.sessions_size(), 1);
  EXPECT_GE(stats.sessions(0).batches_published(), 6u);
  EXPECT_GE(stats.samples_decoded(), 16u);
  EXPECT_EQ(stats.samples_failed(), 0u);

  bool notified = false;
  ASSERT_TRUE(daemon_->Attach(resp->session_id(), [&] { notified = true; }).ok());
  EXPECT_EQ(daemon_->Attach(resp->session_id(), [] {}).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(daemon_->CloseSession(resp->session_id()).ok());
  EXPECT_TRUE(notified);
  // The daemon let go of it (this process's mapping is the consumer's).
  EXPECT_EQ(daemon_->ListSessions().size(), 0u);
  // Batches already published stay readable; then the close is reported.
  absl::StatusOr<int> next;
  uint64_t seq = 6;
  while ((next = (*ring)->Acquire(seq, absl::Seconds(5), nullptr)).ok()) {
    (*ring)->Release(*next);
    ASSERT_LE(++seq, 6u + 4u);  // At most the ring's 4 slots.
  }
  EXPECT_EQ(next.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(next.status().message().find("closed"), std::string::npos);
  EXPECT_EQ(daemon_->CloseSession(resp->session_id()).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(daemon_->Attach(999, [] {}).code(), absl::StatusCode::kNotFound);
}

// What a session reads is written to L2 charged to the session's user.
TEST_F(DaemonTest, L2ChargesWhatASessionReadsToItsUser) {
  daemon_.reset();
  DaemonOptions o;
  o.decode_threads = 2;
  o.shm_prefix = prefix_;
  o.l2.path = testdata::MakeTempDir("daemon-l2");
  o.l2.max_bytes = 64 << 20;
  daemon_ = std::make_unique<Daemon>(o);
  ASSERT_TRUE(daemon_->Start().ok());
  const Caller alice = Caller::User(5001, /*admin=*/false);
  auto resp = daemon_->OpenSession(Request(), alice);
  ASSERT_TRUE(resp.ok()) << resp.status();
  auto ring = TakeRing(*daemon_, *resp, 5001);
  ASSERT_TRUE(ring.ok()) << ring.status();
  for (uint64_t seq = 0; seq < 4; ++seq) {  // The whole epoch: every file read.
    auto slot = (*ring)->Acquire(seq, absl::Seconds(30), nullptr);
    ASSERT_TRUE(slot.ok()) << slot.status();
    (*ring)->Release(*slot);
  }
  ASSERT_TRUE(daemon_->CloseSession(resp->session_id(), alice).ok());
  L2CacheTesting::Flush(*daemon_->l2());
  EXPECT_EQ(daemon_->l2()->Stats().entries(), 10u);
  EXPECT_GT(daemon_->l2()->OwnedBytes(5001), 0u);
  EXPECT_EQ(daemon_->l2()->OwnedBytes(L2Cache::kNobody), 0u);
}

TEST_F(DaemonTest, ClientGoneReclaimsRing) {
  auto resp = daemon_->OpenSession(Request());
  ASSERT_TRUE(resp.ok());
  ASSERT_TRUE(daemon_->Attach(resp->session_id(), nullptr).ok());
  daemon_->Detach(resp->session_id(), /*client_gone=*/true);  // Closed on a thread of its own.
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (daemon_->GetStats().sessions_reclaimed() == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));  // Polling the counter: its ring is gone then.
  }
  EXPECT_TRUE(shm::Segment::List(prefix_).empty());
  v1::DaemonStats stats = daemon_->GetStats();
  EXPECT_EQ(stats.sessions_reclaimed(), 1u);
  EXPECT_EQ(stats.sessions_size(), 0);
}

TEST_F(DaemonTest, StopClosesRingsWithShutdownReason) {
  auto resp = daemon_->OpenSession(Request());
  ASSERT_TRUE(resp.ok());
  auto ring = TakeRing(*daemon_, *resp);
  ASSERT_TRUE(ring.ok());
  daemon_->Stop();
  EXPECT_EQ((*ring)->close_reason(), shm::kClosedByShutdown);
  EXPECT_EQ(daemon_->OpenSession(Request()).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(DaemonTest, CallersTouchOnlyTheirOwnSessionsUnlessAdmin) {
  const Caller alice = Caller::User(5001, /*admin=*/false);
  const Caller bob = Caller::User(5002, /*admin=*/false);
  const Caller admin = Caller::User(0, /*admin=*/true);
  auto resp = daemon_->OpenSession(Request(), alice);
  ASSERT_TRUE(resp.ok()) << resp.status();
  const uint64_t id = resp->session_id();
  // Bob sees that a session exists, not whose data it reads.
  auto seen = daemon_->ListSessions(bob);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].dataset(), "(another user's session)");
  EXPECT_EQ(seen[0].client_uid(), 5001);
  EXPECT_NE(daemon_->ListSessions(alice)[0].dataset().find(*root_), std::string::npos);
  EXPECT_NE(daemon_->GetStats(admin).sessions(0).dataset().find(*root_),
            std::string::npos);
  // Only alice or an admin may close or attach to it; pools are admins'.
  EXPECT_EQ(daemon_->CloseSession(id, bob).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(daemon_->Attach(id, [] {}, bob).code(), absl::StatusCode::kPermissionDenied);
  v1::ResizePoolRequest resize;
  resize.set_pool("decode");
  resize.set_threads(1);
  EXPECT_EQ(daemon_->ResizePool(resize, alice).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(daemon_->ResizePool(resize, admin).ok());
  v1::WarmCacheRequest warm;
  *warm.mutable_dataset() = Request().spec().dataset();
  EXPECT_EQ(daemon_->WarmCache(warm, bob).status().code(),
            absl::StatusCode::kPermissionDenied);
  // An admin's warm-up: its dataset shows to admins only.
  ASSERT_TRUE(daemon_->WarmCache(warm, admin).ok());
  daemon_->WaitForWarmJobs();
  ASSERT_EQ(daemon_->GetStats(bob).warm_jobs_size(), 1);
  EXPECT_EQ(daemon_->GetStats(bob).warm_jobs(0).dataset(), "(an admin's warm-up)");
  EXPECT_NE(daemon_->GetStats(admin).warm_jobs(0).dataset().find(*root_), std::string::npos);
  // The ring goes only to alice's uid.
  EXPECT_EQ(daemon_->HandOffRing(id, resp->ring().handoff_token(), 5002, 0)
                .status()
                .code(),
            absl::StatusCode::kPermissionDenied);
  // Which files her samples are: hers to ask, not bob's; an image's file
  // has a path and no array geometry.
  v1::DescribeSamplesRequest describe;
  describe.set_session_id(id);
  describe.add_indices(0);
  describe.add_indices(1);
  EXPECT_EQ(daemon_->DescribeSamples(describe, bob).status().code(),
            absl::StatusCode::kPermissionDenied);
  auto described = daemon_->DescribeSamples(describe, alice);
  ASSERT_TRUE(described.ok()) << described.status();
  ASSERT_EQ(described->samples_size(), 2);
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(described->samples(k).files_size(), 1);
    const v1::SampleFile& f = described->samples(k).files(0);
    EXPECT_EQ(f.path(), described->paths(k));
    EXPECT_EQ(f.path().rfind(*root_, 0), 0u) << f.path();
    EXPECT_EQ(f.shape_size(), 0);
    EXPECT_EQ(f.affine_size(), 0);
  }
  describe.add_indices(1u << 30);
  EXPECT_EQ(daemon_->DescribeSamples(describe, alice).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(daemon_->CloseSession(id, alice).ok());
}

// One class of two small photo-like JPEGs in `root`.
absl::Status MakeTinyDataset(const std::string& root) {
  testdata::FolderSpec fs;
  fs.classes = 1;
  fs.per_class = 2;
  fs.min_side = 40;
  fs.max_side = 50;
  return testdata::MakeFolderDataset(root, fs).status();
}

// A val session of the tiny dataset at `root`, 2 samples a batch.
v1::OpenSessionRequest TinyRequest(const std::string& root, uint32_t image_size) {
  v1::OpenSessionRequest r;
  r.mutable_spec()->mutable_dataset()->mutable_folder()->set_path(root);
  r.mutable_spec()->set_batch_size(2);
  r.mutable_spec()->set_transform(v1::TRANSFORM_VAL);
  r.mutable_spec()->set_image_size(image_size);
  return r;
}

TEST(DaemonQuotaTest, RingBudgetAndSessionsPerUser) {
  std::string root = testdata::MakeTempDir("quota");
  ASSERT_TRUE(MakeTinyDataset(root).ok());
  DaemonOptions o;
  o.decode_threads = 1;
  o.shm_prefix = absl::StrCat("stoker-dq", getpid(), ".");
  o.max_sessions_per_user = 1;
  o.max_ring_bytes = 4ULL << 20;
  Daemon d(o);
  ASSERT_TRUE(d.Start().ok());
  v1::OpenSessionRequest r = TinyRequest(root, 32);
  const Caller alice = Caller::User(7001, false), bob = Caller::User(7002, false);
  ASSERT_TRUE(d.OpenSession(r, alice).ok());
  auto again = d.OpenSession(r, alice);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(again.status().message().find("max-sessions-per-user"), std::string::npos);
  EXPECT_TRUE(d.OpenSession(r, bob).ok());  // Another user's quota.
  r.mutable_spec()->set_image_size(512);  // 4 slots x 2 x 768 KiB: over 4 MiB.
  auto big = d.OpenSession(r, Caller());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(big.status().message().find("max-ring-bytes"), std::string::npos);
  EXPECT_EQ(d.ListSessions().size(), 2u);
  d.Stop();
  EXPECT_TRUE(shm::Segment::List(o.shm_prefix).empty());
  std::filesystem::remove_all(root);
}

// One user's rings are budgeted too, before anything is allocated; and a
// session whose client never attaches is closed and its ring reclaimed.
TEST(DaemonQuotaTest, PerUserRingBytesAndSessionsThatNeverAttach) {
  std::string root = testdata::MakeTempDir("quota-user");
  ASSERT_TRUE(MakeTinyDataset(root).ok());
  DaemonOptions o;
  o.decode_threads = 1;
  o.shm_prefix = absl::StrCat("stoker-du", getpid(), ".");
  o.max_ring_bytes_per_user = 2ULL << 20;
  o.attach_timeout = absl::Milliseconds(100);
  o.reap_interval = absl::Milliseconds(10);
  Daemon d(o);
  ASSERT_TRUE(d.Start().ok());
  v1::OpenSessionRequest r = TinyRequest(root, 512);  // 4 slots x 2 x 768 KiB: 6 MiB.
  const Caller alice = Caller::User(7201, false);
  auto big = d.OpenSession(r, alice);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(big.status().message().find("max-ring-bytes-per-user"), std::string::npos)
      << big.status();
  EXPECT_TRUE(shm::Segment::List(o.shm_prefix).empty());
  EXPECT_TRUE(d.OpenSession(r, Caller()).ok());  // Admins are not limited.
  r.mutable_spec()->set_image_size(32);
  auto lone = d.OpenSession(r, alice);  // Never attached: reaped.
  ASSERT_TRUE(lone.ok()) << lone.status();
  auto kept = d.OpenSession(r, alice);
  ASSERT_TRUE(kept.ok()) << kept.status();
  ASSERT_TRUE(d.Attach(kept->session_id(), nullptr, alice).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (d.GetStats().sessions_reclaimed() < 2 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));  // Polling the counter.
  }
  EXPECT_EQ(d.GetStats().sessions_reclaimed(), 2u);  // The admin's and the lone one.
  std::vector<v1::SessionStats> left = d.ListSessions();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].session_id(), kept->session_id());
  d.Stop();
  std::filesystem::remove_all(root);
}

// An id kept from before a restart names no session of the new daemon.
TEST(DaemonIdTest, EachDaemonNumbersItsSessionsFromAPointOfItsOwn) {
  std::string root = testdata::MakeTempDir("ids");
  ASSERT_TRUE(MakeTinyDataset(root).ok());
  std::vector<uint64_t> first;
  for (int k = 0; k < 3; ++k) {
    DaemonOptions o;
    o.decode_threads = 1;
    o.shm_prefix = absl::StrCat("stoker-di", getpid(), ".");
    Daemon d(o);
    ASSERT_TRUE(d.Start().ok());
    auto a = d.OpenSession(TinyRequest(root, 32), Caller());
    auto b = d.OpenSession(TinyRequest(root, 32), Caller());
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(b->session_id(), a->session_id() + 1);
    EXPECT_LT(a->session_id(), uint64_t{1} << 53);
    first.push_back(a->session_id());
    d.Stop();
  }
  // Three daemons, three starting points (the same twice: one in 10^6).
  EXPECT_NE(first[0], first[1]);
  EXPECT_NE(first[1], first[2]);
  std::filesystem::remove_all(root);
}

// Beside root/fine/, root/hung/, whose reads hang until fs.Release(): a
// daemon's options reading through them (fs outlives the daemon: declare
// this first).
struct HungReads {
  explicit HungReads(const std::string& name) : root(testdata::MakeTempDir(name)) {
    EXPECT_TRUE(MakeTinyDataset(root + "/hung").ok());
    EXPECT_TRUE(MakeTinyDataset(root + "/fine").ok());
    fs.hold_substring = "/hung/";
    options.decode_threads = 1;
    options.fs = &fs;
    options.shm_prefix = absl::StrCat("stoker-", name, getpid(), ".");
  }
  ~HungReads() { std::filesystem::remove_all(root); }
  std::string hung() const { return root + "/hung"; }
  std::string fine() const { return root + "/fine"; }

  const std::string root;
  FaultInjectingFileSystem fs{FileSystem::Default()};
  DaemonOptions options;
};

// A reclaim closes its session on a thread of its own: while one whose
// read hangs (NFS, FUSE) waits for it, another's ring is reclaimed.
TEST(DaemonReapTest, AHungReadDelaysNoOtherReclaim) {
  HungReads h("reap");
  DaemonOptions& o = h.options;
  o.attach_timeout = absl::Milliseconds(100);
  o.reap_interval = absl::Milliseconds(10);
  Daemon d(o);
  ASSERT_TRUE(d.Start().ok());
  auto reclaimed = [&](uint64_t n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (d.GetStats().sessions_reclaimed() < n && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));  // Polling the counter.
    }
    return d.GetStats().sessions_reclaimed();
  };
  // Never attached, so reaped; its read hangs, so its close waits.
  auto hung = d.OpenSession(TinyRequest(h.hung(), 32), Caller());
  ASSERT_TRUE(hung.ok()) << hung.status();
  h.fs.holding.WaitForNotification();
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!d.ListSessions().empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));  // Polling: taken to be closed.
  }
  ASSERT_TRUE(d.ListSessions().empty());
  auto fine = d.OpenSession(TinyRequest(h.fine(), 32), Caller());
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ(reclaimed(1), 1u);  // The fine one, while the hung one still closes.
  std::vector<std::string> rings = shm::Segment::List(o.shm_prefix);
  EXPECT_EQ(rings.size(), 1u);  // The hung one's, still held.
  h.fs.Release();
  EXPECT_EQ(reclaimed(2), 2u);
  d.Stop();
  EXPECT_TRUE(shm::Segment::List(o.shm_prefix).empty());
}

// A close that waits for a hung read answers after its while, and the
// session keeps its user's place until its ring is really gone.
TEST(DaemonReapTest, AHungCloseAnswersAndKeepsItsPlace) {
  HungReads h("close");
  DaemonOptions& o = h.options;
  o.attach_timeout = absl::ZeroDuration();
  o.max_sessions_per_user = 1;
  o.close_wait = absl::Milliseconds(50);
  Daemon d(o);
  ASSERT_TRUE(d.Start().ok());
  const Caller alice = Caller::User(7301, false);
  auto hung = d.OpenSession(TinyRequest(h.hung(), 32), alice);
  ASSERT_TRUE(hung.ok()) << hung.status();
  h.fs.holding.WaitForNotification();
  EXPECT_TRUE(d.CloseSession(hung->session_id(), alice).ok());  // While its read hangs.
  EXPECT_TRUE(d.ListSessions().empty());
  EXPECT_EQ(shm::Segment::List(o.shm_prefix).size(), 1u);  // Still closing.
  auto refused = d.OpenSession(TinyRequest(h.fine(), 32), alice);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  h.fs.Release();
  absl::StatusOr<v1::OpenSessionResponse> next;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!(next = d.OpenSession(TinyRequest(h.fine(), 32), alice)).ok() &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));  // Polling: its place comes back with its ring.
  }
  EXPECT_TRUE(next.ok()) << next.status();
  d.Stop();
  EXPECT_TRUE(shm::Segment::List(o.shm_prefix).empty());
}

// A shutdown closes every session apart: a client whose session waits for
// a hung read does not hold up another's word of the shutdown.
TEST(DaemonReapTest, AHungSessionDelaysNoOtherShutdown) {
  HungReads h("shutdown");
  DaemonOptions& o = h.options;
  o.attach_timeout = absl::ZeroDuration();
  Daemon d(o);
  ASSERT_TRUE(d.Start().ok());
  std::vector<std::unique_ptr<shm::RingConsumer>> fine;
  for (int k = 0; k < 8; ++k) {  // Around the hung one in the table's order.
    auto r = d.OpenSession(TinyRequest(h.fine(), 32), Caller());
    ASSERT_TRUE(r.ok()) << r.status();
    auto ring = TakeRing(d, *r);
    ASSERT_TRUE(ring.ok()) << ring.status();
    fine.push_back(*std::move(ring));
    if (k == 3) {
      ASSERT_TRUE(d.OpenSession(TinyRequest(h.hung(), 32), Caller()).ok());
      h.fs.holding.WaitForNotification();
    }
  }
  std::thread stopper([&] { d.Stop(); });
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  auto all_told = [&] {
    for (const auto& ring : fine) {
      if (ring->close_reason() != shm::kClosedByShutdown) return false;
    }
    return true;
  };
  while (!all_told() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));  // Polling the rings' headers.
  }
  EXPECT_TRUE(all_told());  // While the hung session still closes.
  h.fs.Release();
  stopper.join();
  fine.clear();
  EXPECT_TRUE(shm::Segment::List(o.shm_prefix).empty());
}

// A non-admin caller's dataset is read only in a folder its client handed
// over: no token, a token for another folder or another uid are refused; a
// symlink out of the folder is read as the caller's own open reads it.
TEST(DaemonConfinementTest, DatasetsStayBeneathTheFolderTheClientOpened) {
  std::string root = testdata::MakeTempDir("confine");
  ASSERT_TRUE(MakeTinyDataset(root + "/data").ok());
  ASSERT_TRUE(MakeTinyDataset(root + "/secret").ok());
  // A sample that is a symlink to a file outside the dataset folder.
  std::filesystem::create_symlink(root + "/secret/class_00/img_0000.jpg",
                                  root + "/data/class_00/zz_escape.jpg");
  DaemonOptions o;
  o.decode_threads = 1;
  o.shm_prefix = absl::StrCat("stoker-dc", getpid(), ".");
  o.handoff_socket = root + "/ring.sock";  // Callers must authenticate.
  Daemon d(o);
  ASSERT_TRUE(d.Start().ok());
  const Caller alice = Caller::User(7101, false);
  v1::OpenSessionRequest r;
  r.mutable_spec()->mutable_dataset()->mutable_folder()->set_path(root + "/data");
  r.mutable_spec()->set_batch_size(3);
  r.mutable_spec()->set_transform(v1::TRANSFORM_VAL);
  r.mutable_spec()->set_image_size(16);
  r.mutable_spec()->set_on_error(v1::ON_ERROR_ZEROS);
  auto no_token = d.OpenSession(r, alice);
  EXPECT_EQ(no_token.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(no_token.status().message().find("has not shown it can open"),
            std::string::npos);
  // A token registered by another uid; a folder handed over without the
  // client's opener.
  ServedRoot bobs = RegisterServedRoot(d.authorizer(), root + "/data", 7102);
  r.mutable_spec()->mutable_dataset()->set_root_token(bobs.token);
  EXPECT_EQ(d.OpenSession(r, alice).status().code(), absl::StatusCode::kPermissionDenied);
  r.mutable_spec()->mutable_dataset()->set_root_token(d.authorizer().RegisterRoot(
      open((root + "/data").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC), -1, 7101));
  EXPECT_EQ(d.OpenSession(r, alice).status().code(), absl::StatusCode::kPermissionDenied);
  // The right folder: served, the symlink out read by the caller's opener.
  ServedRoot alices = RegisterServedRoot(d.authorizer(), root + "/data", 7101);
  r.mutable_spec()->mutable_dataset()->set_root_token(alices.token);
  auto resp = d.OpenSession(r, alice);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->dataset_samples(), 3u);
  auto ring = TakeRing(d, *resp, 7101);
  ASSERT_TRUE(ring.ok()) << ring.status();
  auto slot = (*ring)->Acquire(0, absl::Seconds(20), nullptr);
  ASSERT_TRUE(slot.ok());
  shm::SlotView v = (*ring)->Slot(*slot);
  int ok = 0, refused = 0;
  for (int i = 0; i < 3; ++i) {
    (v.status[i] == shm::kSampleOk ? ok : refused)++;
  }
  EXPECT_EQ(ok, 3);
  EXPECT_EQ(refused, 0);
  (*ring)->Release(*slot);
  d.Stop();
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace stoker
