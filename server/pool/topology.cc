#include "server/pool/topology.h"

#include <numa.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <set>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace stoker {

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(cpus[i])
                           : absl::StrCat(cpus[i], "-", cpus[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ",");
}

// libnuma's numa_parse_cpustring() reads the same syntax but reports errors
// on stderr, and only against the CPUs that exist; this one names the part.
absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view text) {
  std::set<int> cpus;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    std::pair<absl::string_view, absl::string_view> range =
        absl::StrSplit(part, absl::MaxSplits('-', 1));
    int lo = -1, hi = -1;
    const bool is_range = part.find('-') != absl::string_view::npos;
    if (!absl::SimpleAtoi(range.first, &lo) ||
        !absl::SimpleAtoi(is_range ? range.second : range.first, &hi) ||
        lo < 0 || hi < lo || hi >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad CPU list '", text, "' at '", part, "': want e.g. 0-3,8"));
    }
    for (int c = lo; c <= hi; ++c) cpus.insert(c);
  }
  return std::vector<int>(cpus.begin(), cpus.end());
}

Topology Topology::Single() {
  Topology t;
  t.nodes_.push_back(NumaNode{0, AllowedCpus(), -1});
  return t;
}

Topology Topology::Detect() {
  if (numa_available() < 0) return Single();
  const std::vector<int> allowed = AllowedCpus();
  Topology t;
  for (int node = 0; node <= numa_max_node(); ++node) {
    NumaNode n;
    n.id = t.size();
    n.memory_node = node;
    for (int cpu : allowed) {
      if (numa_node_of_cpu(cpu) == node) n.cpus.push_back(cpu);
    }
    if (!n.cpus.empty()) t.nodes_.push_back(std::move(n));
  }
  if (t.nodes_.empty()) return Single();
  return t;
}

absl::StatusOr<Topology> Topology::Parse(absl::string_view spec) {
  const std::vector<int> allowed = AllowedCpus();
  Topology t;
  std::set<int> seen;
  for (absl::string_view part : absl::StrSplit(spec, ';')) {
    absl::StatusOr<std::vector<int>> cpus = ParseCpuList(part);
    if (!cpus.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--numa-topology node ", t.size(), ": ", cpus.status().message(),
          " (nodes are separated by ';', e.g. 0-3;4-7)"));
    }
    for (int c : *cpus) {
      if (!std::binary_search(allowed.begin(), allowed.end(), c)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--numa-topology node ", t.size(), ": CPU ", c,
            " is not one this process may run on (", FormatCpuList(allowed), ")"));
      }
      if (!seen.insert(c).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--numa-topology: CPU ", c, " is in two nodes"));
      }
    }
    t.nodes_.push_back(NumaNode{t.size(), *std::move(cpus), -1});
  }
  return t;
}

int Topology::total_cpus() const {
  int n = 0;
  for (const NumaNode& node : nodes_) n += static_cast<int>(node.cpus.size());
  return n;
}

int Topology::NodeOfCpus(const std::vector<int>& cpus) const {
  int best = -1;
  size_t best_count = 0;
  for (const NumaNode& node : nodes_) {
    size_t count = 0;
    for (int c : cpus) {
      count += std::binary_search(node.cpus.begin(), node.cpus.end(), c);
    }
    if (count > best_count) {
      best = node.id;
      best_count = count;
    }
  }
  return best;
}

int Topology::NodeOfGpu(absl::string_view bus_id, const std::string& sysfs) const {
  // domain:bus:device.function, in hex; NVML pads the domain to 8 digits.
  std::vector<absl::string_view> parts = absl::StrSplit(bus_id, absl::ByAnyChar(":."));
  uint32_t v[4];
  if (parts.size() != 4) return -1;
  for (int i = 0; i < 4; ++i) {
    if (parts[i].empty() || !absl::SimpleHexAtoi(parts[i], &v[i])) return -1;
  }
  const std::string path = absl::StrFormat("%s/bus/pci/devices/%04x:%02x:%02x.%x/numa_node",
                                           sysfs, v[0], v[1], v[2], v[3]);
  std::ifstream in(path);
  int kernel_node = -1;
  if (!(in >> kernel_node) || kernel_node < 0) return -1;
  for (const NumaNode& node : nodes_) {
    if (node.memory_node == kernel_node) return node.id;
  }
  return -1;
}

void Topology::PinThread(int node) const {
  if (node < 0 || node >= size()) return;
  const NumaNode& n = nodes_[node];
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : n.cpus) CPU_SET(c, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (n.memory_node >= 0 && numa_available() >= 0) numa_set_preferred(n.memory_node);
}

void Topology::RunOn(int node, const std::function<void()>& fn) const {
  std::thread t([&] {
    PinThread(node);
    fn();
  });
  t.join();
}

int MemoryNodeOf(const void* address) {
  if (numa_available() < 0) return -1;
  const uintptr_t page = reinterpret_cast<uintptr_t>(address) &
                         ~static_cast<uintptr_t>(sysconf(_SC_PAGESIZE) - 1);
  void* pages[1] = {reinterpret_cast<void*>(page)};
  int status[1] = {-1};
  if (numa_move_pages(0, 1, pages, nullptr, status, 0) != 0) return -1;
  return status[0] >= 0 ? status[0] : -1;
}

}  // namespace stoker
