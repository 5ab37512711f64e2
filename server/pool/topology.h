// The machine's NUMA layout as the daemon uses it: nodes, the CPUs of each
// that this process may run on, and the node a GPU or a set of client CPUs
// belongs to. Read from libnuma (which reads sysfs), or given by hand
// ("0-3;4-7": two nodes) so every multi-node path runs on a one-node
// machine; such hand-made nodes have no memory node of their own.
//
// Also: pinning the calling thread to a node (CPU affinity and, for a real
// node, a preferred memory node), and running a function on a short-lived
// thread pinned so, which is how ring pages are first touched on their
// session's node.
//
// Immutable after construction; thread-safe.
#ifndef STOKER_SERVER_POOL_TOPOLOGY_H_
#define STOKER_SERVER_POOL_TOPOLOGY_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stoker {

struct NumaNode {
  int id = 0;             // Index in Topology::nodes().
  std::vector<int> cpus;  // Sorted, non-empty.
  int memory_node = -1;   // The kernel's node id; -1 for a hand-made node.
};

class Topology {
 public:
  // The nodes libnuma reports, each limited to the CPUs this process may
  // run on (sched_getaffinity); nodes left without CPUs are dropped. One
  // node of every allowed CPU where libnuma finds no NUMA support.
  static Topology Detect();
  // Hand-made nodes: CPU lists separated by ';' ("0-3,8;4-7"). CPUs this
  // process may not run on are an error, and so is a CPU in two nodes.
  // INVALID_ARGUMENT naming the part at fault.
  static absl::StatusOr<Topology> Parse(absl::string_view spec);
  // One node of every allowed CPU (NUMA off).
  static Topology Single();

  const std::vector<NumaNode>& nodes() const { return nodes_; }
  int size() const { return static_cast<int>(nodes_.size()); }
  int total_cpus() const;

  // The node holding most of `cpus` (ties: the lower node); -1 when none
  // of them is in any node.
  int NodeOfCpus(const std::vector<int>& cpus) const;
  // The node of the GPU at PCI address `bus_id` ("0000:3b:00.0"; NVML's
  // "00000000:3B:00.0" too), from <sysfs>/bus/pci/devices/<bdf>/numa_node
  // mapped to this topology's node; -1 when unknown, off-node, or the
  // address is malformed. `sysfs` is "/sys" but for tests.
  int NodeOfGpu(absl::string_view bus_id,
                const std::string& sysfs = "/sys") const;

  // Pins the calling thread to the node's CPUs and, for a real node,
  // prefers its memory for the thread's new pages.
  void PinThread(int node) const;
  // Runs `fn` on a new thread pinned to `node` and waits for it.
  void RunOn(int node, const std::function<void()>& fn) const;

 private:
  std::vector<NumaNode> nodes_;
};

// "0-3,8,10-11" from sorted CPU numbers, and back (INVALID_ARGUMENT for a
// malformed list).
std::string FormatCpuList(const std::vector<int>& cpus);
absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view text);
// The CPUs the calling thread may run on.
std::vector<int> AllowedCpus();
// The kernel's memory node of the page at `address` (faulting it in if it
// is not yet), -1 when it cannot be told.
int MemoryNodeOf(const void* address);

}  // namespace stoker

#endif  // STOKER_SERVER_POOL_TOPOLOGY_H_
