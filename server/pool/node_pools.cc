#include "server/pool/node_pools.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace stoker {

NodePools::NodePools(std::string name, const Topology& topology, bool pinned,
                     int threads, bool spill, std::function<void()> worker_idle)
    : topology_(topology), pinned_(pinned), spill_(spill) {
  const std::vector<int> split = Split(threads);
  for (int n = 0; n < topology_.size(); ++n) {
    std::function<void()> init;
    if (pinned_) init = [this, n] { topology_.PinThread(n); };
    // Thread names: "<name>" alone, "<name>N-" per node when several.
    std::string pool_name = size_t{1} == split.size() && !pinned_
                                ? name
                                : absl::StrCat(name, n, "-");
    pools_.push_back(std::make_unique<ThreadPool>(std::move(pool_name), split[n],
                                                  std::move(init), worker_idle));
    spilled_in_.push_back(std::make_unique<std::atomic<uint64_t>>(0));
  }
}

std::vector<int> NodePools::Split(int threads) const {
  const int nodes = topology_.size();
  const int cpus = std::max(1, topology_.total_cpus());
  threads = std::max(threads, nodes);
  std::vector<int> split(nodes);
  int given = 0;
  for (int n = 0; n < nodes; ++n) {
    split[n] = std::max<int>(
        1, static_cast<int64_t>(threads) * topology_.nodes()[n].cpus.size() / cpus);
    given += split[n];
  }
  // Rounding: what is left goes one each from node 0; the nodes raised to
  // one thread are paid for by the last ones.
  for (int n = 0; given < threads; n = (n + 1) % nodes) {
    ++split[n];
    ++given;
  }
  for (int n = nodes - 1; given > threads; n = (n + nodes - 1) % nodes) {
    if (split[n] > 1) {
      --split[n];
      --given;
    }
  }
  return split;
}

int NodePools::threads() const {
  int total = 0;
  for (const auto& p : pools_) total += p->size();
  return total;
}

int NodePools::Schedule(int node, std::function<void()> task, uint64_t group,
                        int weight, int64_t user) {
  if (node < 0 || node >= size()) node = 0;
  int target = node;
  ThreadPool& own = *pools_[node];
  if (spill_ && size() > 1 && own.queued() >= static_cast<size_t>(own.size())) {
    for (int i = 1; i < size(); ++i) {
      const int other = (node + i) % size();
      const ThreadPool& p = *pools_[other];
      if (p.queued() == 0 && p.active() < p.size()) {
        target = other;
        spilled_in_[other]->fetch_add(1, std::memory_order_relaxed);
        break;
      }
    }
  }
  pools_[target]->Schedule(std::move(task), group, weight, user);
  return target;
}

std::deque<std::function<void()>> NodePools::TakeQueued(uint64_t group) {
  std::deque<std::function<void()>> all;
  for (auto& pool : pools_) {
    for (auto& task : pool->TakeQueued(group)) all.push_back(std::move(task));
  }
  return all;
}

void NodePools::RunOn(int node, const std::function<void()>& fn) const {
  if (pinned_) {
    topology_.RunOn(node, fn);
  } else {
    fn();
  }
}

void NodePools::Resize(int threads) {
  const std::vector<int> split = Split(threads);
  for (int n = 0; n < size(); ++n) pools_[n]->Resize(split[n]);
}

absl::StatusOr<std::pair<int, std::string>> NodePools::Place(
    const v1::Placement& p, const std::vector<double>& load,
    const std::string& sysfs) const {
  const Topology& topology = topology_;
  if (p.has_node()) {
    if (p.node() < 0 || p.node() >= topology.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "placement.node ", p.node(), " is not a node of this daemon (0..",
          topology.size() - 1, ")"));
    }
    return std::pair{p.node(), std::string("requested")};
  }
  if (!pinned_) return std::pair{0, std::string("numa off")};
  if (!p.gpu_bus_id().empty()) {
    const int node = topology.NodeOfGpu(p.gpu_bus_id(), sysfs);
    if (node >= 0) return std::pair{node, absl::StrCat("gpu ", p.gpu_bus_id())};
  }
  const std::vector<int> cpus(p.cpus().begin(), p.cpus().end());
  const int node = topology.NodeOfCpus(cpus);
  if (node >= 0) return std::pair{node, absl::StrCat("cpus ", FormatCpuList(cpus))};
  // Least loaded: the fewest sessions' weight per decode thread.
  auto at = [&](int n) { return n < static_cast<int>(load.size()) ? load[n] : 0.0; };
  int best = 0;
  for (int n = 1; n < topology.size(); ++n) {
    if (at(n) / pools_[n]->size() < at(best) / pools_[best]->size()) {
      best = n;
    }
  }
  return std::pair{best, std::string("least loaded")};
}

}  // namespace stoker
