// Warm-up jobs (WarmCache): every file of a dataset's samples read once
// through the reader stage, so that L1/L2 hold them before training starts.
// Each job is driven by its own thread, with at most `concurrency` reads
// in flight on the reader pool; its counters (done, failed, read from the
// source) are listed while the daemon runs. Stop() ends the jobs early and
// joins them; Start after Stop is UNAVAILABLE.
//
// The reads and the pool come in as functions, so the unit is tested over
// fakes. Thread-safe; what `schedule` and `read` use must outlive Stop().
#ifndef STOKER_SERVER_CACHE_CACHE_WARMER_H_
#define STOKER_SERVER_CACHE_CACHE_WARMER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "proto/stoker.pb.h"
#include "server/dataset/dataset.h"

namespace stoker {

class CacheWarmer {
 public:
  // Runs a task on the reader pool.
  using Schedule = std::function<void(std::function<void()>)>;
  // Reads one file of a sample (Sample::file(k)); *from_source tells
  // whether the source was read (not a cache).
  using Read = std::function<absl::Status(const Dataset& ds, const std::string& file,
                                          bool* from_source)>;

  CacheWarmer(Schedule schedule, Read read);
  ~CacheWarmer() { Stop(); }
  CacheWarmer(const CacheWarmer&) = delete;
  CacheWarmer& operator=(const CacheWarmer&) = delete;

  // Starts a job over `dataset` (concurrency >= 1); its id.
  absl::StatusOr<uint64_t> Start(std::shared_ptr<const Dataset> dataset,
                                 uint32_t concurrency);
  // Every job started, finished or not, in start order.
  std::vector<v1::WarmJob> Jobs() const;
  // Waits for every job started so far to finish.
  void Wait();
  // Ends the jobs early (no new read starts), then waits for them.
  void Stop();

 private:
  struct Job;
  void Run(const std::shared_ptr<Job>& job, uint32_t concurrency);

  const Schedule schedule_;
  const Read read_;
  absl::Notification stopping_;
  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<std::shared_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_SERVER_CACHE_CACHE_WARMER_H_
