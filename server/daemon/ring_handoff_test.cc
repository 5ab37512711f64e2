// The ring handoff in-process: a client with the session's token gets a
// descriptor that maps the session's ring; wrong tokens, other uids,
// unknown sessions and malformed requests get the precise code.
#include "server/daemon/ring_handoff.h"

#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "shm/fd_passing.h"
#include "shm/ring.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

class RingHandoffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testdata::MakeTempDir("handoff");
    testdata::FolderSpec fs;
    fs.classes = 1;
    fs.per_class = 4;
    fs.min_side = 40;
    fs.max_side = 60;
    ASSERT_TRUE(testdata::MakeFolderDataset(root_, fs).ok());
    socket_ = root_ + "/ring.sock";
    DaemonOptions o;
    o.decode_threads = 1;
    o.shm_prefix = absl::StrCat("stoker-ho", getpid(), ".");
    o.handoff_socket = socket_;
    daemon_ = std::make_unique<Daemon>(o);
    ASSERT_TRUE(daemon_->Start().ok());
    auto server = RingHandoffServer::Start(daemon_.get(), socket_, 0600);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  void TearDown() override {
    server_.reset();
    daemon_.reset();
    std::filesystem::remove_all(root_);
  }

  v1::OpenSessionResponse Open(bool slabs = false) {
    v1::OpenSessionRequest r;
    v1::SessionSpec* s = r.mutable_spec();
    if (slabs) s->mutable_slabs();  // In host memory.
    s->mutable_dataset()->mutable_folder()->set_path(root_);
    s->set_batch_size(2);
    s->set_transform(v1::TRANSFORM_VAL);
    s->set_image_size(16);
    auto resp = daemon_->OpenSession(r);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return *resp;
  }

  std::string root_, socket_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<RingHandoffServer> server_;
};

TEST_F(RingHandoffTest, TokenHolderMapsTheRingAndReadsABatch) {
  v1::OpenSessionResponse resp = Open();
  EXPECT_EQ(resp.ring().handoff_socket(), socket_);
  ASSERT_EQ(resp.ring().handoff_token().size(), 32u);
  auto fd = shm::RequestRingFd(socket_, resp.session_id(),
                               resp.ring().handoff_token());
  ASSERT_TRUE(fd.ok()) << fd.status();
  auto seg = shm::Segment::Map(*fd, "handed-off");
  close(*fd);
  ASSERT_TRUE(seg.ok()) << seg.status();
  EXPECT_EQ(seg->size(), resp.ring().segment_bytes());
  auto ring = shm::RingConsumer::Open(*std::move(seg), resp.session_id());
  ASSERT_TRUE(ring.ok()) << ring.status();
  auto slot = (*ring)->Acquire(0, absl::Seconds(20), nullptr);
  ASSERT_TRUE(slot.ok()) << slot.status();
  EXPECT_EQ((*ring)->Slot(*slot).control->sample_count, 2u);
  (*ring)->Release(*slot);
  EXPECT_EQ(server_->handed_off(), 1u);
  // The owner is recorded for stats.
  EXPECT_EQ(daemon_->GetStats().sessions(0).client_uid(), getuid());
}

// A session's slabs follow its ring, once: a second request for the ring
// gets the ring alone, so no peer collects copies of the slabs.
TEST_F(RingHandoffTest, TheSlabsFollowTheRingOnce) {
  v1::OpenSessionResponse resp = Open(/*slabs=*/true);
  ASSERT_EQ(resp.ring().slab_kind(), "host");
  const uint32_t count = resp.ring().slab_descriptors();
  ASSERT_EQ(count, resp.ring().slots() + 1);
  std::vector<int> slabs;
  auto fd = shm::RequestRingFd(socket_, resp.session_id(), resp.ring().handoff_token(), count,
                               &slabs);
  ASSERT_TRUE(fd.ok()) << fd.status();
  close(*fd);
  EXPECT_EQ(slabs.size(), count);
  shm::CloseFds(&slabs);
  auto again = shm::RequestRingFd(socket_, resp.session_id(), resp.ring().handoff_token(),
                                  count, &slabs);
  EXPECT_FALSE(again.ok());
  EXPECT_TRUE(slabs.empty());
  fd = shm::RequestRingFd(socket_, resp.session_id(), resp.ring().handoff_token());
  ASSERT_TRUE(fd.ok()) << fd.status();
  close(*fd);
  // A session without slabs names none.
  EXPECT_EQ(Open().ring().slab_descriptors(), 0u);
}

TEST_F(RingHandoffTest, WrongTokenUnknownSessionAndOtherUidAreRefused) {
  v1::OpenSessionResponse resp = Open();
  std::string bad = resp.ring().handoff_token();
  bad[0] = bad[0] == 'a' ? 'b' : 'a';
  EXPECT_EQ(shm::RequestRingFd(socket_, resp.session_id(), bad).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(shm::RequestRingFd(socket_, resp.session_id() + 100,
                               resp.ring().handoff_token())
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  // Once handed to this uid, the ring is refused to any other uid.
  auto fd = daemon_->HandOffRing(resp.session_id(), resp.ring().handoff_token(),
                                 getuid(), getpid());
  ASSERT_TRUE(fd.ok());
  close(*fd);
  EXPECT_EQ(daemon_->HandOffRing(resp.session_id(), resp.ring().handoff_token(),
                                 getuid() + 1, getpid())
                .status()
                .code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(server_->refused(), 2u);
}

TEST_F(RingHandoffTest, MalformedRequestIsInvalidArgument) {
  auto sock = shm::ConnectUnix(socket_, absl::Seconds(2));
  ASSERT_TRUE(sock.ok());
  ASSERT_TRUE(shm::SendWithFd(*sock, "GIVE ME EVERYTHING\n", -1).ok());
  std::string reply;
  int fd = -1;
  ASSERT_TRUE(shm::ReceiveWithFd(*sock, 4096, &reply, &fd).ok());
  close(*sock);
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(reply.rfind(absl::StrCat("ERR ", static_cast<int>(
                                         absl::StatusCode::kInvalidArgument)),
                        0),
            0u)
      << reply;
}

TEST_F(RingHandoffTest, AStalledPeerDoesNotHoldUpOthers) {
  v1::OpenSessionResponse resp = Open();
  // A peer that connects and says nothing (held for the server's 2 s).
  auto stalled = shm::ConnectUnix(socket_, absl::Seconds(2));
  ASSERT_TRUE(stalled.ok());
  // Another client, willing to wait 1 s only, is still answered.
  auto sock = shm::ConnectUnix(socket_, absl::Seconds(2));
  ASSERT_TRUE(sock.ok());
  ASSERT_TRUE(shm::SetSocketTimeout(*sock, absl::Seconds(1)).ok());
  ASSERT_TRUE(shm::SendWithFd(*sock, absl::StrCat("STOKER-RING 1 ", resp.session_id(),
                                                  " ", resp.ring().handoff_token(), "\n"),
                              -1)
                  .ok());
  std::string reply;
  int fd = -1;
  absl::Status got = shm::ReceiveWithFd(*sock, 4096, &reply, &fd);
  EXPECT_TRUE(got.ok()) << got;
  EXPECT_EQ(reply, "OK");
  EXPECT_GE(fd, 0);
  if (fd >= 0) close(fd);
  close(*sock);
  close(*stalled);
}

}  // namespace
}  // namespace stoker
