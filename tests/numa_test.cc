// NUMA-aware decode pools on a live daemon: sessions placed by request,
// GPU, CPUs and load; decode threads kept to their node's CPUs (the
// kernel's allowed list and the CPU each last ran on); spilling to an idle
// node; resizing one node's pool; the same batches whatever the layout.
// Two hand-made nodes (--numa-topology) split this machine's CPUs.
#include <sched.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/cpp/read_summary.h"
#include "gtest/gtest.h"
#include "server/daemon/metrics.h"
#include "server/pool/topology.h"
#include "tests/folder_suite.h"
#include "tests/harness.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

using testing::TestDaemon;

class NumaTest : public testing::FolderSuite {
 protected:
  void SetUp() override {
    const std::vector<int> cpus = AllowedCpus();
    if (cpus.size() < 2) GTEST_SKIP() << "needs 2 CPUs to split into nodes";
    const size_t half = cpus.size() / 2;
    node_cpus_ = {{cpus.begin(), cpus.begin() + half}, {cpus.begin() + half, cpus.end()}};
    topology_ = FormatCpuList(node_cpus_[0]) + ";" + FormatCpuList(node_cpus_[1]);
  }
  DaemonOptions Options(int decode_threads, bool numa = true) const {
    DaemonOptions o;
    o.decode_threads = decode_threads;
    o.reader_threads = 8;
    o.decoded_cache_bytes = 0;
    if (numa) o.numa_topology = topology_;
    return o;
  }
  static v1::SessionSpec OnCpus(const std::vector<int>& cpus) {
    v1::SessionSpec s = Spec();
    for (int c : cpus) s.mutable_placement()->add_cpus(c);
    return s;
  }
  static const v1::SessionStats* Find(const v1::DaemonStats& s, uint64_t id) {
    for (const auto& ss : s.sessions()) {
      if (ss.session_id() == id) return &ss;
    }
    return nullptr;
  }
  static uint64_t Reference() {
    TestDaemon d(false, [] {
      DaemonOptions o;
      o.decode_threads = 2;
      o.numa = NumaMode::kOff;
      o.decoded_cache_bytes = 0;
      return o;
    }());
    auto s = d.Connect()->OpenSession(Spec());
    EXPECT_TRUE(s.ok());
    return ReadBatches(**s, 2 * (*s)->batches_per_epoch())->checksum;
  }

  std::vector<std::vector<int>> node_cpus_;
  std::string topology_;
};

TEST_F(NumaTest, PlacesSessionsByRequestGpuCpusAndLoad) {
  TestDaemon d(false, Options(2));
  auto c = d.Connect();
  auto on1 = c->OpenSession(OnCpus(node_cpus_[1]));
  ASSERT_TRUE(on1.ok()) << on1.status();
  v1::SessionSpec asked = Spec();
  asked.mutable_placement()->set_node(1);
  auto requested = c->OpenSession(asked);
  ASSERT_TRUE(requested.ok());
  asked.mutable_placement()->set_node(2);
  auto bad = c->OpenSession(asked);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("placement.node 2 is not a node of this daemon (0..1)"),
            std::string::npos) << bad.status();
  // No CPUs, no GPU: the least loaded node (node 1 has two sessions). The
  // client libraries always send CPUs, so this one goes in-process.
  v1::OpenSessionRequest bare;
  *bare.mutable_spec() = Spec();
  auto least = d.daemon()->OpenSession(bare);
  ASSERT_TRUE(least.ok()) << least.status();
  // This process may run on both nodes: a tie goes to the lower node.
  auto client_cpus = c->OpenSession(Spec());
  ASSERT_TRUE(client_cpus.ok());

  auto st = c->GetStats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->numa(), "2 nodes (--numa-topology)");
  const v1::SessionStats* a = Find(*st, (*on1)->id());
  const v1::SessionStats* r = Find(*st, (*requested)->id());
  const v1::SessionStats* l = Find(*st, least->session_id());
  const v1::SessionStats* b = Find(*st, (*client_cpus)->id());
  ASSERT_TRUE(a && r && l && b);
  EXPECT_EQ(a->numa_node(), 1);
  EXPECT_EQ(a->placement(), "cpus " + FormatCpuList(node_cpus_[1]));
  EXPECT_EQ(r->numa_node(), 1);
  EXPECT_EQ(r->placement(), "requested");
  EXPECT_EQ(l->numa_node(), 0);
  EXPECT_EQ(l->placement(), "least loaded");
  EXPECT_EQ(b->numa_node(), 0);
  EXPECT_EQ(b->placement(), "cpus " + FormatCpuList(AllowedCpus()));
  ASSERT_TRUE(d.daemon()->CloseSession(least->session_id()).ok());
}

// The GPU's node comes from sysfs, as the kernel reports it, on the
// machine's own (libnuma) nodes.
TEST_F(NumaTest, PlacesBesideTheGpu) {
  const std::string sysfs = testdata::MakeTempDir("sysfs");
  const std::string dev = sysfs + "/bus/pci/devices/0000:3b:00.0";
  std::filesystem::create_directories(dev);
  const Topology machine = Topology::Detect();
  std::ofstream(dev + "/numa_node") << machine.nodes().back().memory_node << "\n";
  DaemonOptions o = Options(2, /*numa=*/false);
  o.numa = NumaMode::kOn;
  o.sysfs = sysfs;
  TestDaemon d(false, o);
  auto c = d.Connect();
  v1::SessionSpec spec = Spec();
  spec.mutable_placement()->set_gpu_bus_id("00000000:3B:00.0");
  auto s = c->OpenSession(spec);
  ASSERT_TRUE(s.ok()) << s.status();
  spec.mutable_placement()->set_gpu_bus_id("0000:af:00.0");  // Not in sysfs.
  auto unknown = c->OpenSession(spec);
  ASSERT_TRUE(unknown.ok());
  ASSERT_TRUE(ReadBatches(**s, 2).ok());
  auto st = c->GetStats();
  EXPECT_EQ(Find(*st, (*s)->id())->numa_node(), machine.size() - 1);
  EXPECT_EQ(Find(*st, (*s)->id())->placement(), "gpu 00000000:3B:00.0");
  EXPECT_EQ(Find(*st, (*unknown)->id())->placement().rfind("cpus ", 0), 0u);
  // The ring was allocated on the session's node, as the kernel says.
  EXPECT_EQ(Find(*st, (*s)->id())->ring_memory_node(),
            machine.nodes().back().memory_node);
  std::filesystem::remove_all(sysfs);
}

// /proc/self/task/*: thread name -> (allowed CPU list, CPU it last ran on).
// Threads come and go while it reads; one gone before its files are read
// is left out.
std::multimap<std::string, std::pair<std::string, int>> Threads() {
  std::multimap<std::string, std::pair<std::string, int>> out;
  // No throwing calls: an exception here would unwind past the reading
  // threads of the caller.
  std::error_code error;
  for (std::filesystem::directory_iterator it("/proc/self/task", error), end;
       !error && it != end; it.increment(error)) {
    const auto& task = *it;
    std::ifstream comm(task.path() / "comm");
    std::string name, line, allowed;
    std::getline(comm, name);
    std::ifstream status(task.path() / "status");
    while (std::getline(status, line)) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0) {
        allowed = line.substr(line.find_first_not_of(" \t", 18));
      }
    }
    // /proc/<pid>/task/<tid>/stat: field 39 is the CPU it last ran on.
    std::ifstream stat(task.path() / "stat");
    std::string all((std::istreambuf_iterator<char>(stat)), {});
    // A thread that exited since the listing leaves nothing to read.
    const size_t name_end = all.rfind(')');
    if (name.empty() || name_end == std::string::npos || name_end + 2 > all.size()) {
      continue;
    }
    std::istringstream rest(all.substr(name_end + 2));
    std::string field;
    int cpu = -1;
    for (int f = 3; rest >> field; ++f) {
      if (f == 39) {
        cpu = static_cast<int>(std::strtol(field.c_str(), nullptr, 10));
        break;
      }
    }
    out.emplace(name, std::pair{allowed, cpu});
  }
  return out;
}

TEST_F(NumaTest, DecodeThreadsRunOnlyOnTheirNode) {
  TestDaemon d(false, Options(4));
  auto c = d.Connect();
  auto s0 = c->OpenSession(OnCpus(node_cpus_[0]));
  auto s1 = c->OpenSession(OnCpus(node_cpus_[1]));
  ASSERT_TRUE(s0.ok() && s1.ok());
  std::atomic<bool> done{false};
  auto read = [&](Session& s) {
    while (!done.load() && s.Next(absl::Seconds(30)).ok()) {
    }
  };
  std::thread t0([&] { read(**s0); }), t1([&] { read(**s1); });
  // Whatever ends this scope, the readers are stopped and joined.
  struct Joiner {
    std::atomic<bool>& done;
    std::thread& a;
    std::thread& b;
    ~Joiner() {
      done = true;
      if (a.joinable()) a.join();
      if (b.joinable()) b.join();
    }
  } joiner{done, t0, t1};
  // Sample the decode threads while both sessions decode.
  std::map<int, std::set<int>> ran_on;
  std::map<int, std::set<std::string>> allowed;
  int samples = 0;
  for (int i = 0; i < 200; ++i, absl::SleepFor(absl::Milliseconds(5))) {
    for (const auto& [name, info] : Threads()) {
      for (int n = 0; n < 2; ++n) {
        if (name.rfind(absl::StrCat("stoker-dec", n, "-"), 0) != 0) continue;
        allowed[n].insert(info.first);
        ran_on[n].insert(info.second);
        ++samples;
      }
    }
  }
  done = true;
  (*s0)->Close().IgnoreError();
  (*s1)->Close().IgnoreError();
  t0.join();
  t1.join();
  EXPECT_GE(samples, 400);
  for (int n = 0; n < 2; ++n) {
    EXPECT_EQ(allowed[n], std::set<std::string>{FormatCpuList(node_cpus_[n])}) << n;
    for (int cpu : ran_on[n]) {
      EXPECT_TRUE(std::count(node_cpus_[n].begin(), node_cpus_[n].end(), cpu))
          << "a decode thread of node " << n << " ran on CPU " << cpu;
    }
  }
  auto st = c->GetStats();
  int decode_pools = 0;
  for (const auto& p : st->pools()) {
    if (p.pool() != "decode") continue;
    ++decode_pools;
    EXPECT_EQ(p.threads(), 2u);
    EXPECT_EQ(p.cpus(), FormatCpuList(node_cpus_[p.node()]));
  }
  EXPECT_EQ(decode_pools, 2);
  // Metrics carry the node.
  int labelled = 0;
  for (const auto& family : MetricFamilies(*st)) {
    if (family.name != "stoker_pool_threads") continue;
    for (const auto& m : family.metric) {
      for (const auto& label : m.label) labelled += label.name == "numa_node";
    }
  }
  EXPECT_EQ(labelled, 2);
}

// One session on node 0, node 1 idle: with spill, node 1's threads take
// part of its work; without, none. Resizing one node's pool mid-read and
// either way, the batches are those of a daemon without NUMA.
TEST_F(NumaTest, SpillAndPerNodeResizeKeepTheChecksum) {
  const uint64_t reference = Reference();
  for (bool spill : {true, false}) {
    DaemonOptions o = Options(2);
    o.numa_spill = spill;
    TestDaemon d(false, o);
    auto c = d.Connect();
    auto s = c->OpenSession(OnCpus(node_cpus_[0]));
    ASSERT_TRUE(s.ok());
    std::atomic<bool> done{false};
    std::thread resizer([&] {
      auto admin = d.Connect();
      for (int i = 0; !done.load(); ++i) {
        EXPECT_TRUE(admin->ResizePool("decode", 1 + i % 2, /*node=*/0).ok());
        absl::SleepFor(absl::Milliseconds(20));
      }
    });
    auto sum = ReadBatches(**s, 2 * (*s)->batches_per_epoch());
    done = true;
    resizer.join();
    ASSERT_TRUE(sum.ok()) << sum.status();
    EXPECT_EQ(sum->checksum, reference) << "spill " << spill;
    auto st = c->GetStats();
    const v1::SessionStats* ss = Find(*st, (*s)->id());
    uint64_t spilled_in = 0;
    for (const auto& p : st->pools()) {
      if (p.pool() == "decode" && p.node() == 1) spilled_in = p.spilled_in();
    }
    if (spill) {
      EXPECT_GT(ss->samples_spilled(), 0u);
      EXPECT_EQ(spilled_in, ss->samples_spilled());
    } else {
      EXPECT_EQ(ss->samples_spilled(), 0u);
      EXPECT_EQ(spilled_in, 0u);
    }
    EXPECT_EQ(c->ResizePool("decode", 2, 2).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(c->ResizePool("reader", 2, 0).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(c->ResizePool("decode", 1).status().code(),
              absl::StatusCode::kInvalidArgument);  // Fewer than one per node.
    auto r = c->ResizePool("decode", 3, 1);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->threads(), 3u);
    EXPECT_EQ(c->ResizePool("decode", 6)->threads(), 6u);
    EXPECT_EQ(c->GetStats()->decode_threads(), 6u);
  }
}

TEST_F(NumaTest, BadTopologyFailsStart) {
  DaemonOptions o = Options(2);
  o.numa_topology = "0;0";
  Daemon daemon(o);
  absl::Status s = daemon.Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("CPU 0 is in two nodes"), std::string::npos) << s;
}

}  // namespace
}  // namespace stoker
