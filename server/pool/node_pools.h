// The decode pools: one ThreadPool per NUMA node of a Topology, its workers
// pinned to that node's CPUs (and memory), or a single unpinned pool when
// NUMA is off. A session's decode work goes to its node's pool; when that
// pool is saturated (a full round of tasks already waiting) and another
// node's pool has an idle worker and nothing queued, the task spills there,
// so no thread idles while a session waits. Within a pool, sessions share
// by turns (server/pool/thread_pool.h).
//
// Thread-safe. The pools live as long as the NodePools.
#ifndef STOKER_SERVER_POOL_NODE_POOLS_H_
#define STOKER_SERVER_POOL_NODE_POOLS_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/stoker.pb.h"
#include "server/pool/thread_pool.h"
#include "server/pool/topology.h"

namespace stoker {

class NodePools {
 public:
  // `threads` (>= 1 per node) split over the nodes by their CPU counts;
  // `pinned`: the workers keep to their node's CPUs. `worker_idle`: as
  // ThreadPool's, for every pool.
  NodePools(std::string name, const Topology& topology, bool pinned, int threads,
            bool spill = true, std::function<void()> worker_idle = nullptr);

  int size() const { return static_cast<int>(pools_.size()); }
  bool pinned() const { return pinned_; }
  const Topology& topology() const { return topology_; }
  ThreadPool& pool(int node) { return *pools_[node]; }
  const ThreadPool& pool(int node) const { return *pools_[node]; }
  // Threads over all nodes.
  int threads() const;
  // Tasks that ran on `node`'s pool for sessions of other nodes.
  uint64_t spilled_in(int node) const { return spilled_in_[node]->load(); }

  // Runs `task` on `node`'s pool, or spills it (above); returns the node
  // that got it.
  int Schedule(int node, std::function<void()> task, uint64_t group, int weight,
               int64_t user = -1);
  // ThreadPool::TakeQueued over every node's pool.
  std::deque<std::function<void()>> TakeQueued(uint64_t group);
  // Runs `fn` on a thread pinned to `node` (Topology::RunOn) when the pools
  // are pinned, else right here; returns when it has.
  void RunOn(int node, const std::function<void()>& fn) const;
  // `threads` (total) split over the nodes, at least one each.
  void Resize(int threads);
  // `threads` split by the nodes' CPU counts, at least 1 each.
  std::vector<int> Split(int threads) const;

  // The node a session placed by `p` decodes on, and why ("requested",
  // "numa off", "gpu <bus id>", "cpus <list>", "least loaded"): the node
  // asked for (INVALID_ARGUMENT when there is none of that number), else
  // the GPU's (its PCI address under `sysfs`), else the trainer's CPUs',
  // else the node whose decode threads carry the least `load` (per node:
  // the weights of its sessions) each. Unpinned pools: node 0.
  absl::StatusOr<std::pair<int, std::string>> Place(const v1::Placement& p,
                                                    const std::vector<double>& load,
                                                    const std::string& sysfs) const;

 private:
  const Topology topology_;
  const bool pinned_;
  const bool spill_;
  std::vector<std::unique_ptr<ThreadPool>> pools_;
  std::vector<std::unique_ptr<std::atomic<uint64_t>>> spilled_in_;
};

}  // namespace stoker

#endif  // STOKER_SERVER_POOL_NODE_POOLS_H_
