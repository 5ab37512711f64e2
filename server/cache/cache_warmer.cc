#include "server/cache/cache_warmer.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "util/log.h"

namespace stoker {

struct CacheWarmer::Job {
  uint64_t id = 0;
  std::shared_ptr<const Dataset> dataset;
  absl::Time start = absl::Now();
  std::atomic<uint64_t> done{0}, failed{0}, source_reads{0};
  std::atomic<int64_t> seconds_ns{-1};  // Set when finished.

  v1::WarmJob Snapshot() const {
    v1::WarmJob j;
    j.set_job_id(id);
    j.set_dataset(dataset->description);
    j.set_total(dataset->sample_count());
    j.set_done(done.load(std::memory_order_relaxed));
    j.set_failed(failed.load(std::memory_order_relaxed));
    j.set_source_reads(source_reads.load(std::memory_order_relaxed));
    const int64_t ns = seconds_ns.load(std::memory_order_acquire);
    j.set_finished(ns >= 0);
    j.set_seconds(ns >= 0 ? ns / 1e9 : absl::ToDoubleSeconds(absl::Now() - start));
    return j;
  }
};

CacheWarmer::CacheWarmer(Schedule schedule, Read read)
    : schedule_(std::move(schedule)), read_(std::move(read)) {}

absl::StatusOr<uint64_t> CacheWarmer::Start(std::shared_ptr<const Dataset> dataset,
                                            uint32_t concurrency) {
  auto job = std::make_shared<Job>();
  job->dataset = std::move(dataset);
  concurrency = std::max(concurrency, 1u);
  absl::MutexLock lock(&mu_);
  if (stopped_) return absl::UnavailableError("the daemon is shutting down");
  job->id = next_id_++;
  jobs_.push_back(job);
  threads_.emplace_back([this, job, concurrency] {
    RunLoggingExceptions("a warm job", [&] { Run(job, concurrency); });
  });
  LogInfo(absl::StrCat("warm job ", job->id, ": ", job->dataset->description, ", ",
                       job->dataset->sample_count(), " samples, ", concurrency,
                       " reads at a time"));
  return job->id;
}

void CacheWarmer::Run(const std::shared_ptr<Job>& job, uint32_t concurrency) {
  absl::Mutex m;
  uint32_t outstanding = 0;
  const Dataset& ds = *job->dataset;
  for (uint64_t i = 0; i < ds.sample_count(); ++i) {
    if (stopping_.HasBeenNotified()) break;
    const Sample& sample = ds.sample(i);
    {
      absl::MutexLock lock(&m);
      auto has_room = [&] { return outstanding < concurrency; };
      m.Await(absl::Condition(&has_room));
      ++outstanding;
    }
    schedule_([this, job, &sample, &m, &outstanding] {
      bool from_source = false, failed = false;
      for (size_t k = 0; k < 1 + sample.more.size(); ++k) {  // Every file.
        bool read = false;
        failed |= !read_(*job->dataset, sample.file(k), &read).ok();
        from_source |= read;
      }
      if (failed) job->failed.fetch_add(1, std::memory_order_relaxed);
      if (from_source) job->source_reads.fetch_add(1, std::memory_order_relaxed);
      job->done.fetch_add(1, std::memory_order_relaxed);
      absl::MutexLock lock(&m);
      --outstanding;
    });
  }
  {
    absl::MutexLock lock(&m);
    m.Await(absl::Condition(+[](uint32_t* n) { return *n == 0; }, &outstanding));
  }
  job->seconds_ns.store(absl::ToInt64Nanoseconds(absl::Now() - job->start),
                        std::memory_order_release);
  LogInfo(absl::StrCat("warm job ", job->id, " finished: ", job->done.load(),
                       " samples, ", job->source_reads.load(), " read from the source, ",
                       job->failed.load(), " failed"));
}

std::vector<v1::WarmJob> CacheWarmer::Jobs() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::WarmJob> out;
  for (const auto& job : jobs_) out.push_back(job->Snapshot());
  return out;
}

void CacheWarmer::Wait() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

void CacheWarmer::Stop() {
  {
    absl::MutexLock lock(&mu_);  // A refused Start means the jobs were told.
    if (!stopped_) stopping_.Notify();
    stopped_ = true;
  }
  Wait();
}

}  // namespace stoker
