#include "server/pool/topology.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "server/pool/node_pools.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

// Tests split the CPUs this process may use into two hand-made nodes; with
// a single CPU there is nothing to split.
std::string TwoNodes() {
  const std::vector<int> cpus = AllowedCpus();
  if (cpus.size() < 2) return "";
  const size_t half = cpus.size() / 2;
  return FormatCpuList({cpus.begin(), cpus.begin() + half}) + ";" +
         FormatCpuList({cpus.begin() + half, cpus.end()});
}

TEST(CpuListTest, ParsesAndFormats) {
  auto cpus = ParseCpuList("0-3, 8,10-11");
  ASSERT_TRUE(cpus.ok()) << cpus.status();
  EXPECT_EQ(*cpus, (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(FormatCpuList(*cpus), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({5}), "5");
  for (const char* bad : {"", "3-1", "a", "1-", "-1", "0-99999"}) {
    EXPECT_EQ(ParseCpuList(bad).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(TopologyTest, DetectCoversTheAllowedCpus) {
  const Topology t = Topology::Detect();
  ASSERT_GE(t.size(), 1);
  EXPECT_EQ(t.total_cpus(), static_cast<int>(AllowedCpus().size()));
  for (const NumaNode& n : t.nodes()) EXPECT_GE(n.memory_node, 0);
  // Memory this thread just touched is on a node the kernel knows.
  std::vector<char> page(1 << 16, 1);
  EXPECT_GE(MemoryNodeOf(page.data()), 0);
}

TEST(TopologyTest, ParseNamesWhatIsWrong) {
  const std::vector<int> allowed = AllowedCpus();
  auto one = Topology::Parse(FormatCpuList(allowed));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->size(), 1);
  EXPECT_EQ(one->nodes()[0].memory_node, -1);
  auto twice = Topology::Parse(absl::StrCat(allowed[0], ";", allowed[0]));
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(twice.status().message().find("in two nodes"), std::string::npos);
  auto absent = Topology::Parse("1000");
  EXPECT_NE(absent.status().message().find("CPU 1000 is not one this process may run on"),
            std::string::npos)
      << absent.status();
  auto garbled = Topology::Parse("0;x");
  EXPECT_NE(garbled.status().message().find("node 1: bad CPU list 'x'"), std::string::npos)
      << garbled.status();
}

TEST(TopologyTest, PlacesCpusAndGpus) {
  const std::string spec = TwoNodes();
  if (spec.empty()) GTEST_SKIP() << "needs 2 CPUs";
  auto t = Topology::Parse(spec);
  ASSERT_TRUE(t.ok());
  const std::vector<int>& n0 = t->nodes()[0].cpus;
  const std::vector<int>& n1 = t->nodes()[1].cpus;
  EXPECT_EQ(t->NodeOfCpus({n1[0]}), 1);
  EXPECT_EQ(t->NodeOfCpus({n0[0]}), 0);
  EXPECT_EQ(t->NodeOfCpus({n0[0], n1[0]}), 0);  // A tie: the lower node.
  EXPECT_EQ(t->NodeOfCpus({}), -1);
  EXPECT_EQ(t->NodeOfCpus({4000}), -1);

  // A GPU's node from a sysfs tree, in the form Linux has it; only real
  // (detected) nodes have a kernel node to match.
  const std::string sysfs =
      std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") +
      "/sysfs";
  const std::string dev = sysfs + "/bus/pci/devices/0000:3b:00.0";
  std::filesystem::create_directories(dev);
  std::ofstream(dev + "/numa_node") << "0\n";
  const Topology real = Topology::Detect();
  EXPECT_EQ(real.NodeOfGpu("0000:3b:00.0", sysfs), 0);
  EXPECT_EQ(real.NodeOfGpu("00000000:3B:00.0", sysfs), 0);  // NVML's spelling.
  EXPECT_EQ(real.NodeOfGpu("0000:af:00.0", sysfs), -1);     // No such device.
  EXPECT_EQ(real.NodeOfGpu("garbage", sysfs), -1);
  EXPECT_EQ(t->NodeOfGpu("0000:3b:00.0", sysfs), -1);  // Hand-made nodes.
  std::ofstream(dev + "/numa_node") << "-1\n";  // No NUMA affinity.
  EXPECT_EQ(real.NodeOfGpu("0000:3b:00.0", sysfs), -1);
}

// The Cpus_allowed_list of thread `tid` of this process.
std::string AllowedListOf(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Cpus_allowed_list:", 0) == 0) {
      return line.substr(line.find_first_not_of(" \t", 18));
    }
  }
  return "";
}

// Every task of a node's pool runs on that node's CPUs: the kernel's
// allowed list of each worker is the node's, and sched_getcpu sampled in
// 400 tasks per node never leaves it.
TEST(NodePoolsTest, WorkersKeepToTheirNode) {
  const std::string spec = TwoNodes();
  if (spec.empty()) GTEST_SKIP() << "needs 2 CPUs";
  auto t = Topology::Parse(spec);
  ASSERT_TRUE(t.ok());
  NodePools pools("test-dec", *t, /*pinned=*/true, 4, /*spill=*/false);
  ASSERT_EQ(pools.size(), 2);
  EXPECT_EQ(pools.pool(0).size(), 2);
  EXPECT_EQ(pools.pool(1).size(), 2);
  std::mutex mu;
  std::vector<std::set<int>> cpus(2);
  std::vector<std::set<std::string>> lists(2);
  std::atomic<int> done{0};
  for (int i = 0; i < 800; ++i) {
    const int node = i % 2;
    EXPECT_EQ(pools.Schedule(node, [&, node] {
      const int cpu = sched_getcpu();
      const std::string list = AllowedListOf(static_cast<pid_t>(syscall(SYS_gettid)));
      volatile double x = 0;  // A little work, so the scheduler may move us.
      for (int k = 0; k < 20000; ++k) x = x + k;
      std::lock_guard<std::mutex> lock(mu);
      cpus[node].insert(cpu);
      lists[node].insert(list);
      ++done;
    }, node, 1), node);
  }
  while (done.load() < 800) sched_yield();
  for (int n = 0; n < 2; ++n) {
    const std::vector<int>& mine = t->nodes()[n].cpus;
    for (int cpu : cpus[n]) {
      EXPECT_TRUE(std::binary_search(mine.begin(), mine.end(), cpu))
          << "node " << n << " task ran on CPU " << cpu;
    }
    EXPECT_EQ(lists[n], std::set<std::string>{FormatCpuList(mine)}) << "node " << n;
  }
}

TEST(NodePoolsTest, SplitsThreadsByCpus) {
  const std::string spec = TwoNodes();
  if (spec.empty()) GTEST_SKIP() << "needs 2 CPUs";
  auto t = Topology::Parse(spec);
  ASSERT_TRUE(t.ok());
  if (t->nodes()[0].cpus.size() != t->nodes()[1].cpus.size()) {
    GTEST_SKIP() << "needs an even CPU count";
  }
  NodePools pools("test-dec", *t, false, 1);
  EXPECT_EQ(pools.Split(5), (std::vector<int>{3, 2}));
  EXPECT_EQ(pools.Split(1), (std::vector<int>{1, 1}));  // One each at least.
  EXPECT_EQ(pools.threads(), 2);
  pools.Resize(6);
  EXPECT_EQ(pools.pool(0).size(), 3);
  EXPECT_EQ(pools.pool(1).size(), 3);
}

// A saturated node hands tasks to an idle node's pool; counted per pool.
TEST(NodePoolsTest, SpillsToAnIdleNodeOnlyWhenSaturated) {
  const std::string spec = TwoNodes();
  if (spec.empty()) GTEST_SKIP() << "needs 2 CPUs";
  auto t = Topology::Parse(spec);
  ASSERT_TRUE(t.ok());
  NodePools pools("test-dec", *t, true, 2);  // One thread per node.
  absl::Notification release;
  std::atomic<int> ran{0};
  auto block = [&] { release.WaitForNotification(); ++ran; };
  // Node 0's only worker is busy and nothing waits: the next task queues
  // at home (a full round is not yet waiting).
  EXPECT_EQ(pools.Schedule(0, block, 1, 1), 0);
  while (pools.pool(0).active() == 0) sched_yield();
  EXPECT_EQ(pools.Schedule(0, block, 1, 1), 0);
  // Now a round waits on node 0, and node 1 is idle: spill.
  EXPECT_EQ(pools.Schedule(0, block, 1, 1), 1);
  while (pools.pool(1).active() == 0) sched_yield();
  // Node 1 busy too: back home.
  EXPECT_EQ(pools.Schedule(0, block, 1, 1), 0);
  EXPECT_EQ(pools.spilled_in(1), 1u);
  EXPECT_EQ(pools.spilled_in(0), 0u);
  release.Notify();
  while (ran.load() < 4) sched_yield();
}

TEST(NodePoolsTest, PlacesByRequestGpuCpusThenLoad) {
  const std::string spec = TwoNodes();
  if (spec.empty()) GTEST_SKIP() << "needs 2 CPUs";
  auto t = Topology::Parse(spec);
  ASSERT_TRUE(t.ok()) << t.status();
  NodePools pools("test", *t, /*pinned=*/true, /*threads=*/4);
  const std::string sysfs = testdata::MakeTempDir("sysfs");
  v1::Placement p;
  // Asked for: that node, or INVALID_ARGUMENT naming the range.
  p.set_node(1);
  auto asked = pools.Place(p, {}, sysfs);
  ASSERT_TRUE(asked.ok());
  EXPECT_EQ(*asked, (std::pair<int, std::string>{1, "requested"}));
  p.set_node(2);
  auto bad = pools.Place(p, {}, sysfs);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "placement.node 2 is not a node of this daemon (0..1)");
  p.clear_node();
  // A GPU: hand-made nodes have no kernel node to match, so it places
  // nothing and the load decides; on the detected nodes its sysfs node does.
  const std::string dev = sysfs + "/bus/pci/devices/0000:3b:00.0";
  std::filesystem::create_directories(dev);
  std::ofstream(dev + "/numa_node") << "0\n";
  p.set_gpu_bus_id("0000:3b:00.0");
  auto gpu = pools.Place(p, {3, 1}, sysfs);
  ASSERT_TRUE(gpu.ok());
  EXPECT_EQ(*gpu, (std::pair<int, std::string>{1, "least loaded"}));
  NodePools detected("test", Topology::Detect(), /*pinned=*/true, /*threads=*/2);
  auto real = detected.Place(p, {}, sysfs);
  ASSERT_TRUE(real.ok());
  EXPECT_EQ(*real, (std::pair<int, std::string>{0, "gpu 0000:3b:00.0"}));
  p.clear_gpu_bus_id();
  // The trainer's CPUs: node 1's.
  for (int cpu : t->nodes()[1].cpus) p.add_cpus(cpu);
  auto cpus = pools.Place(p, {}, sysfs);
  ASSERT_TRUE(cpus.ok());
  EXPECT_EQ(cpus->first, 1);
  EXPECT_EQ(cpus->second, "cpus " + FormatCpuList(t->nodes()[1].cpus));
  p.clear_cpus();
  // Nothing known: the least weight per decode thread.
  EXPECT_EQ(pools.Place(p, {3, 1}, sysfs)->first, 1);
  EXPECT_EQ(pools.Place(p, {1, 3}, sysfs)->first, 0);
  EXPECT_EQ(pools.Place(p, {}, sysfs)->second, "least loaded");
  std::filesystem::remove_all(sysfs);
}

TEST(NodePoolsTest, UnpinnedPoolsPlaceEverythingOnNodeZero) {
  NodePools pools("test", Topology::Single(), /*pinned=*/false, /*threads=*/1);
  v1::Placement p;
  p.add_cpus(0);
  auto placed = pools.Place(p, {5}, "/nonexistent");
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ(*placed, (std::pair<int, std::string>{0, "numa off"}));
}

}  // namespace
}  // namespace stoker
