// Small helpers shared by the C++ benchmarks. Header-only; stateless.
#ifndef STOKER_BENCH_BENCH_UTIL_H_
#define STOKER_BENCH_BENCH_UTIL_H_

#include <algorithm>
#include <vector>

namespace stoker::bench {

// The median (upper median for even counts) of non-empty `v`.
inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace stoker::bench

#endif  // STOKER_BENCH_BENCH_UTIL_H_
