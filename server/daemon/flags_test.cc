#include "server/daemon/flags.h"

#include <unistd.h>

#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "gtest/gtest.h"
#include "server/daemon/flag_types.h"
#include "shm/fd_passing.h"

ABSL_DECLARE_FLAG(std::string, socket);
ABSL_DECLARE_FLAG(std::string, socket_mode);
ABSL_DECLARE_FLAG(std::string, numa);
ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(int, reader_threads);
ABSL_DECLARE_FLAG(absl::Duration, proof_lifetime);
ABSL_DECLARE_FLAG(int, max_reader_threads_per_user);
ABSL_DECLARE_FLAG(stoker::ByteSize, max_read_bytes_in_flight);
ABSL_DECLARE_FLAG(stoker::ByteSize, max_decode_bytes);
ABSL_DECLARE_FLAG(stoker::ByteSize, max_decode_bytes_in_flight);
ABSL_DECLARE_FLAG(stoker::ByteSize, max_file_bytes);
ABSL_DECLARE_FLAG(uint64_t, object_store_flat_listing);
ABSL_DECLARE_FLAG(absl::Duration, object_store_deadline);
ABSL_DECLARE_FLAG(absl::Duration, object_store_low_speed_time);
ABSL_DECLARE_FLAG(std::string, l2_path);
ABSL_DECLARE_FLAG(stoker::ByteSize, l2_max_bytes);
ABSL_DECLARE_FLAG(stoker::ByteSize, l1_bytes);
ABSL_DECLARE_FLAG(stoker::ByteSize, max_ring_bytes);
ABSL_DECLARE_FLAG(stoker::ByteSize, max_array_bytes_per_user);
ABSL_DECLARE_FLAG(std::string, admin_group);
ABSL_DECLARE_FLAG(int64_t, max_image_pixels);
ABSL_DECLARE_FLAG(bool, allow_root);
ABSL_DECLARE_FLAG(int, exit_with_pid);
ABSL_DECLARE_FLAG(std::string, owners_dir);
ABSL_DECLARE_FLAG(bool, object_store_own_endpoints);

namespace stoker {
namespace {

class FlagsTest : public ::testing::Test {
 protected:
  // These tests may run as root: they say so, as a root service would.
  FlagsTest() { absl::SetFlag(&FLAGS_allow_root, true); }

 private:
  absl::FlagSaver saver_;  // Every test starts from the defaults.
};

// Config() refuses `flag`'s value with INVALID_ARGUMENT naming it.
void ExpectRefused(const std::string& flag) {
  const absl::StatusOr<StokerdConfig> c = Config();
  ASSERT_FALSE(c.ok()) << flag;
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find(flag), std::string::npos) << c.status().message();
}

TEST_F(FlagsTest, DefaultsAreTheMachines) {
  absl::SetFlag(&FLAGS_socket, "/tmp/stoker-flags-test/s.sock");
  const absl::StatusOr<StokerdConfig> c = Config();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->socket, "/tmp/stoker-flags-test/s.sock");
  EXPECT_EQ(c->socket_mode, 0660);
  EXPECT_EQ(c->daemon.handoff_socket, shm::RingSocketPath(c->socket));
  const uint64_t memory = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
  EXPECT_EQ(c->daemon.max_ring_bytes, memory / 2);
  EXPECT_EQ(c->daemon.max_ring_bytes_per_user, memory / 8);
  EXPECT_EQ(c->daemon.max_array_bytes_per_user, c->daemon.l1_bytes / 4);
  EXPECT_EQ(c->daemon.admin_gid, -1);
  EXPECT_EQ(c->daemon.numa, NumaMode::kAuto);
  EXPECT_EQ(c->daemon.object_store_deadline, absl::Minutes(2));
  EXPECT_EQ(c->daemon.object_store_low_speed_bytes, 1024u);
  EXPECT_EQ(c->daemon.object_store_low_speed_time, absl::Seconds(10));
}

TEST_F(FlagsTest, RootIsRefusedUnlessAllowedOrServingAnOwner) {
  if (geteuid() != 0) GTEST_SKIP() << "not root";
  absl::SetFlag(&FLAGS_allow_root, false);
  const absl::StatusOr<StokerdConfig> refused = Config();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("--allow-root"), std::string::npos);
  absl::SetFlag(&FLAGS_exit_with_pid, static_cast<int>(getpid()));
  EXPECT_TRUE(Config().ok());  // An embedded daemon serves only its owner.
}

TEST_F(FlagsTest, SizesAndModesAreTaken) {
  absl::SetFlag(&FLAGS_socket_mode, "0600");
  absl::SetFlag(&FLAGS_numa, "off");
  absl::SetFlag(&FLAGS_l1_bytes, ByteSize{512 << 20});
  absl::SetFlag(&FLAGS_max_ring_bytes, ByteSize{8ULL << 30});
  const absl::StatusOr<StokerdConfig> c = Config();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->socket_mode, 0600);
  EXPECT_EQ(c->daemon.numa, NumaMode::kOff);
  EXPECT_EQ(c->daemon.l1_bytes, 512u << 20);
  EXPECT_EQ(c->daemon.max_ring_bytes_per_user, 2ULL << 30);
  EXPECT_EQ(c->daemon.max_array_bytes_per_user, 128u << 20);
}

// Its own user's endpoints only where that user is the daemon's one admin.
TEST_F(FlagsTest, OwnEndpointsOnlyForADaemonOfOneUser) {
  absl::SetFlag(&FLAGS_object_store_own_endpoints, true);
  ExpectRefused("--object-store-own-endpoints");  // A shared daemon.
  absl::SetFlag(&FLAGS_owners_dir, "/tmp/stoker-embedded-test/owners");
  absl::StatusOr<StokerdConfig> c = Config();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->daemon.object_store_own_endpoints);
  absl::SetFlag(&FLAGS_admin_group, "root");  // Other admins: refused again.
  ExpectRefused("--object-store-own-endpoints");
}

TEST_F(FlagsTest, BadValuesNameTheirFlag) {
  absl::SetFlag(&FLAGS_socket_mode, "0999");
  ExpectRefused("--socket-mode");
  absl::SetFlag(&FLAGS_socket_mode, "0660");
  absl::SetFlag(&FLAGS_threads, -1);
  ExpectRefused("--threads");
  absl::SetFlag(&FLAGS_threads, 4097);
  ExpectRefused("--threads");
  absl::SetFlag(&FLAGS_threads, 0);
  absl::SetFlag(&FLAGS_numa, "sometimes");
  ExpectRefused("--numa");
  absl::SetFlag(&FLAGS_numa, "auto");
  absl::SetFlag(&FLAGS_reader_threads, 0);
  ExpectRefused("--reader-threads");
  absl::SetFlag(&FLAGS_reader_threads, 64);
  absl::SetFlag(&FLAGS_max_reader_threads_per_user, -1);
  ExpectRefused("--max-reader-threads-per-user");
  absl::SetFlag(&FLAGS_max_reader_threads_per_user, 8);
  EXPECT_EQ(Config()->daemon.max_reader_threads_per_user, 8);
  absl::SetFlag(&FLAGS_proof_lifetime, absl::Hours(25));
  ExpectRefused("--proof-lifetime");
  absl::SetFlag(&FLAGS_proof_lifetime, absl::ZeroDuration());
  EXPECT_EQ(Config()->daemon.scan_limits.proof_lifetime, absl::ZeroDuration());
  absl::SetFlag(&FLAGS_proof_lifetime, absl::Minutes(10));
  // No cap named: all but an eighth of the reader threads, one at least
  // kept for the other users.
  EXPECT_EQ(DefaultReaderCap(64), 56);
  EXPECT_EQ(DefaultReaderCap(8), 7);
  EXPECT_EQ(DefaultReaderCap(2), 1);
  EXPECT_EQ(DefaultReaderCap(1), 1);
  // Every file a source may read fits among the reads in flight.
  absl::SetFlag(&FLAGS_max_read_bytes_in_flight, ByteSize{1ULL << 29});
  ExpectRefused("--max-read-bytes-in-flight");
  absl::SetFlag(&FLAGS_max_file_bytes, ByteSize{1ULL << 29});
  EXPECT_EQ(Config()->daemon.max_read_bytes_in_flight, 1ULL << 29);
  absl::SetFlag(&FLAGS_max_read_bytes_in_flight, ByteSize{2ULL << 30});
  absl::SetFlag(&FLAGS_max_file_bytes, ByteSize{1ULL << 30});
  // And every decode among the decodes in flight.
  absl::SetFlag(&FLAGS_max_decode_bytes_in_flight, ByteSize{1ULL << 29});
  ExpectRefused("--max-decode-bytes-in-flight");
  absl::SetFlag(&FLAGS_max_decode_bytes, ByteSize{1ULL << 29});
  EXPECT_EQ(Config()->daemon.max_decode_bytes_in_flight, 1ULL << 29);
  absl::SetFlag(&FLAGS_max_decode_bytes_in_flight, ByteSize{2ULL << 30});
  absl::SetFlag(&FLAGS_max_decode_bytes, ByteSize{1ULL << 30});
  absl::SetFlag(&FLAGS_object_store_flat_listing, 100'001);
  ExpectRefused("--object-store-flat-listing");
  absl::SetFlag(&FLAGS_object_store_flat_listing, 100'000);
  EXPECT_EQ(Config()->daemon.scan_limits.flat_listing_objects, 100'000u);
  absl::SetFlag(&FLAGS_l2_path, "/tmp/stoker-flags-test-l2");
  absl::SetFlag(&FLAGS_l2_max_bytes, ByteSize{1000});
  ExpectRefused("--l2-max-bytes");
  absl::SetFlag(&FLAGS_l2_path, "");
  absl::SetFlag(&FLAGS_admin_group, "no-such-group-of-stoker");
  ExpectRefused("--admin-group");
  absl::SetFlag(&FLAGS_admin_group, "");
  absl::SetFlag(&FLAGS_max_image_pixels, 0);
  ExpectRefused("--max-image-pixels");
  absl::SetFlag(&FLAGS_max_image_pixels, 1000);
  absl::SetFlag(&FLAGS_object_store_deadline, absl::ZeroDuration());
  ExpectRefused("--object-store-deadline");
  absl::SetFlag(&FLAGS_object_store_deadline, absl::Seconds(30));
  absl::SetFlag(&FLAGS_object_store_low_speed_time, absl::Milliseconds(500));
  ExpectRefused("--object-store-low-speed-time");
}

}  // namespace
}  // namespace stoker
