#include "server/objstore/s3_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <deque>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "server/objstore/in_flight_limit.h"
#include "server/objstore/s3_attempt.h"

namespace stoker {
namespace {

// An attempt that ends this close to its request's deadline was cut by it
// (curl's timer fires within a millisecond or so of the time set).
constexpr absl::Duration kDeadlineSlack = absl::Milliseconds(20);

void InitCurlOnce() {
  static const bool ok = [] { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }();
  (void)ok;
}

// A request whose cancellation was raised.
bool Cancelled(const S3Request& r) { return r.cancel != nullptr && r.cancel->cancelled(); }

absl::Status CancelledStatus(const S3Request& r) {
  return absl::CancelledError(absl::StrCat(Named(r), " at ", r.endpoint.ToString(),
                                           ": cancelled by whom it was for"));
}

}  // namespace

class S3Client::Loop {
 public:
  explicit Loop(Options o)
      : options_(std::move(o)),
        limit_now_(std::clamp(options_.initial_in_flight, options_.min_in_flight,
                              options_.max_in_flight)) {
    InitCurlOnce();
    multi_ = curl_multi_init();
    curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS, long{options_.max_in_flight});
    curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, long{options_.max_in_flight});
    thread_ = std::thread([this] { Run(); });
  }

  ~Loop() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    curl_multi_wakeup(multi_);
    thread_.join();
    curl_multi_cleanup(multi_);
  }

  const Options& options() const { return options_; }
  bool OnEventThread() const { return std::this_thread::get_id() == thread_.get_id(); }

  void Submit(S3Request r, std::function<void(S3Reply)> done) {
    auto job = std::make_unique<Job>();
    job->req = std::move(r);
    job->done = std::move(done);
    job->deadline = absl::Now() + options_.deadline;
    if (job->req.cancel != nullptr) {
      // Raised, it wakes the event thread, which ends the request.
      job->cancel_id = job->req.cancel->Subscribe([this] { curl_multi_wakeup(multi_); });
    }
    {
      absl::MutexLock lock(&mu_);
      if (!stop_) {
        incoming_.push_back(std::move(job));
      }
    }
    if (job != nullptr) {
      S3Reply reply;
      reply.status = absl::CancelledError("object store client is shutting down");
      Complete(std::move(job), std::move(reply));
      return;
    }
    curl_multi_wakeup(multi_);
  }

  Stats stats() const {
    Stats s;
    s.requests = requests_.load(std::memory_order_relaxed);
    s.retries = retries_.load(std::memory_order_relaxed);
    s.failures = failures_.load(std::memory_order_relaxed);
    s.bytes = bytes_.load(std::memory_order_relaxed);
    s.throttles = throttles_.load(std::memory_order_relaxed);
    s.in_flight_limit = limit_now_.load(std::memory_order_relaxed);
    return s;
  }

 private:
  struct Job;

  // The requests of one owner (uid) with one credential identity (access
  // key id; none for anonymous ones) to one endpoint: their in-flight limit, how many run,
  // and how many wait (in backoff too). By identity, so one user's
  // throttles (its own request rate, its own bucket's prefixes) halve only
  // its own limit, not every user's of that endpoint.
  struct Path {
    explicit Path(const Options& o)
        : limit(o.min_in_flight, o.initial_in_flight, o.max_in_flight) {}
    InFlightLimit limit;
    int running = 0;
    int waiting = 0;
  };

  // Paths kept while idle; past it, idle ones are forgotten (their limits
  // start again from `initial`) as new ones come: a user naming ever new
  // key ids costs the event thread no more than this.
  static constexpr size_t kMaxPaths = 1024;

  Path* PathOf(Job* job) {
    if (job->path == nullptr) {
      const S3Credentials* c = job->req.credentials.get();
      // By owner too: a key id is no secret, so another user naming it
      // does not share (nor cut) its owner's limit.
      std::string path = absl::StrCat(job->req.endpoint.ToString(), "\n", job->req.owner, "\n",
                                      c != nullptr ? c->access_key_id : "");
      if (paths_.size() >= kMaxPaths && paths_.find(path) == paths_.end()) {
        for (auto it = paths_.begin(); it != paths_.end();) {
          it = it->second.running == 0 && it->second.waiting == 0 ? paths_.erase(it)
                                                                  : std::next(it);
        }
      }
      job->path = &paths_.try_emplace(std::move(path), options_).first->second;
    }
    return job->path;
  }

  // Publishes the limits for stats(): all endpoints', at most the cap.
  void PublishLimit() {
    int64_t sum = 0;
    for (const auto& [endpoint, p] : paths_) sum += p.limit.limit();
    limit_now_.store(static_cast<int>(std::min<int64_t>(sum, options_.max_in_flight)),
                     std::memory_order_relaxed);
  }

  struct Job {
    S3Request req;
    std::function<void(S3Reply)> done;
    int attempt = 0;
    absl::Time not_before = absl::InfinitePast();
    absl::Time deadline = absl::InfiniteFuture();  // The whole request's.
    absl::Status last;  // The last attempt's, while it waits to retry.
    Cancellation::Id cancel_id = 0;  // Its subscription to req.cancel.
    AttemptWire wire;  // The attempt in flight.
    // Its endpoint's path, and how many of its requests were in flight when
    // this attempt was sent (itself included).
    Path* path = nullptr;
    int sent_with = 0;
  };

  // Sets up the job's next attempt on a fresh easy handle, ending by the
  // request's deadline at the latest.
  absl::Status Prepare(Job* job) {
    return PrepareAttempt(job->req, job->attempt,
                          std::min(options_.request_timeout, job->deadline - absl::Now()),
                          attempt_options_, job, &job->wire);
  }

  void Release(Job* job) {
    if (job->wire.easy != nullptr) curl_multi_remove_handle(multi_, job->wire.easy);
    ReleaseAttempt(&job->wire);
  }

  absl::Duration Backoff(int attempt) {
    const absl::Duration ceiling =
        std::min(options_.backoff_cap, options_.backoff_base * (int64_t{1} << std::min(attempt, 20)));
    std::uniform_real_distribution<double> u(0.0, 1.0);
    return ceiling * u(rng_);  // Full jitter.
  }

  void Finish(Job* job, CURLcode code) {
    AttemptFacts& f = job->wire.facts;
    curl_easy_getinfo(job->wire.easy, CURLINFO_RESPONSE_CODE, &f.http);
    // Time to first byte, less connection setup (DNS, connect, TLS).
    curl_off_t first_byte_us = 0, setup_us = 0;
    curl_easy_getinfo(job->wire.easy, CURLINFO_STARTTRANSFER_TIME_T, &first_byte_us);
    curl_easy_getinfo(job->wire.easy, CURLINFO_PRETRANSFER_TIME_T, &setup_us);
    if (code != CURLE_OK) {
      f.transport = code == CURLE_OPERATION_TIMEDOUT ? AttemptFacts::Transport::kTimedOut
                    : RetryableCurl(code)            ? AttemptFacts::Transport::kRetryable
                                                     : AttemptFacts::Transport::kFailed;
      f.transport_error = job->wire.error[0] != '\0' ? job->wire.error : curl_easy_strerror(code);
    }
    AttemptVerdict verdict = JudgeAttempt(job->req, std::move(f));
    S3Reply& reply = verdict.reply;
    const bool retry = verdict.retry, throttled = verdict.throttled;
    bytes_.fetch_add(reply.body.size(), std::memory_order_relaxed);
    Release(job);
    std::unique_ptr<Job> owned = std::move(running_[job]);
    running_.erase(job);
    Path* path = owned->path;
    --path->running;
    if (throttled) {
      throttles_.fetch_add(1, std::memory_order_relaxed);
      path->limit.Throttled();
    } else if (reply.status.ok() && owned->req.method == S3Request::Method::kGet) {
      // GETs alone: a listing's first byte comes after the store's work.
      path->limit.Answered(absl::Microseconds(std::max<curl_off_t>(0, first_byte_us - setup_us)),
                           owned->sent_with, path->waiting > 0, absl::Now());
    }
    PublishLimit();
    const absl::Time now = absl::Now();
    if (!reply.status.ok() && Cancelled(owned->req)) {
      reply.status = CancelledStatus(owned->req);
    } else if (retry && owned->attempt < options_.max_attempts) {
      owned->not_before = now + Backoff(owned->attempt);
      if (owned->not_before < owned->deadline) {
        retries_.fetch_add(1, std::memory_order_relaxed);
        owned->last = reply.status;
        ++path->waiting;
        waiting_.push_back(std::move(owned));
        return;
      }
      // No time is left for another attempt.
      reply.status = PastDeadline(LastWords(*owned, reply.status, now));
    } else if (retry && now >= owned->deadline - kDeadlineSlack) {
      // The deadline cut the attempt.
      reply.status = PastDeadline(LastWords(*owned, reply.status, now));
    }
    if (!reply.status.ok()) failures_.fetch_add(1, std::memory_order_relaxed);
    Complete(std::move(owned), std::move(reply));
  }

  // Ends a request: its done runs, after its cancellation forgot it.
  void Complete(std::unique_ptr<Job> job, S3Reply reply) {
    if (job->req.cancel != nullptr) job->req.cancel->Unsubscribe(job->cancel_id);
    job->done(std::move(reply));
  }

  // What a request past its deadline says went wrong: its last attempt's
  // error, or, where the deadline cut that attempt short (it had only the
  // time left), the answer of the attempt before it.
  static absl::Status LastWords(const Job& job, const absl::Status& attempt, absl::Time now) {
    if (now >= job.deadline - kDeadlineSlack && job.attempt > 1 && !job.last.ok()) {
      return job.last;
    }
    return attempt;
  }

  // The request's deadline has passed (or leaves no time for the next
  // attempt): DEADLINE_EXCEEDED, in the last attempt's words.
  absl::Status PastDeadline(const absl::Status& last) const {
    return absl::DeadlineExceededError(
        absl::StrCat(last.message(), "; too slow: not answered within the request's deadline of ",
                     absl::FormatDuration(options_.deadline)));
  }

  // A request that waited (for a slot, or its backoff) until its deadline.
  void Expire(std::unique_ptr<Job> job) {
    --job->path->waiting;
    absl::Status s = PastDeadline(
        job->attempt > 0 ? job->last
                         : absl::UnavailableError(absl::StrCat(
                               Named(job->req), " at ", job->req.endpoint.ToString(),
                               ": queued, no attempt made")));
    Fail(std::move(job), std::move(s));
  }

  void Fail(std::unique_ptr<Job> job, absl::Status s) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    S3Reply reply;
    reply.status = std::move(s);
    reply.attempts = job->attempt;
    Complete(std::move(job), std::move(reply));
  }

  // Ends the requests whose cancellation was raised, queued or in flight.
  void EndCancelled() {
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (!Cancelled((*it)->req)) {
        ++it;
        continue;
      }
      std::unique_ptr<Job> job = std::move(*it);
      it = waiting_.erase(it);
      --PathOf(job.get())->waiting;
      absl::Status s = CancelledStatus(job->req);
      Fail(std::move(job), std::move(s));
    }
    for (auto it = running_.begin(); it != running_.end();) {
      if (!Cancelled(it->first->req)) {
        ++it;
        continue;
      }
      std::unique_ptr<Job> job = std::move(it->second);
      it = running_.erase(it);
      Release(job.get());  // Aborts the transfer, closing its connection.
      --job->path->running;
      absl::Status s = CancelledStatus(job->req);
      Fail(std::move(job), std::move(s));
    }
  }

  // Starts due requests while there is room: owners take turns (of the
  // requests that could start, the one whose owner started one longest
  // ago; in queue order within an owner), so one user's many requests
  // never hold another's back.
  void StartDue(absl::Time now) {
    for (auto& [endpoint, p] : paths_) p.limit.Tick(now);
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if ((*it)->deadline <= now) {
        std::unique_ptr<Job> job = std::move(*it);
        it = waiting_.erase(it);
        Expire(std::move(job));
      } else {
        ++it;
      }
    }
    while (static_cast<int>(running_.size()) < options_.max_in_flight) {
      auto pick = waiting_.end();
      uint64_t pick_turn = 0;
      for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
        Path* path = PathOf(it->get());
        if ((*it)->not_before > now || path->running >= path->limit.limit()) continue;
        const uint64_t turn = turns_[(*it)->req.owner];  // 0: never served.
        if (pick == waiting_.end() || turn < pick_turn) {
          pick = it;
          pick_turn = turn;
        }
      }
      if (pick == waiting_.end()) return;
      std::unique_ptr<Job> job = std::move(*pick);
      waiting_.erase(pick);
      turns_[job->req.owner] = ++turn_;
      Path* path = job->path;
      --path->waiting;
      ++job->attempt;
      if (absl::Status s = Prepare(job.get()); !s.ok()) {
        Release(job.get());
        Fail(std::move(job), std::move(s));
        continue;
      }
      if (curl_multi_add_handle(multi_, job->wire.easy) != CURLM_OK) {
        Release(job.get());
        Fail(std::move(job), absl::InternalError("curl_multi_add_handle"));
        continue;
      }
      requests_.fetch_add(1, std::memory_order_relaxed);
      ++path->running;
      job->sent_with = path->running;
      Job* raw = job.get();
      running_[raw] = std::move(job);
    }
  }

  int WaitMs(absl::Time now) const {
    int64_t ms = 1000;
    if (static_cast<int>(running_.size()) >= options_.max_in_flight) return static_cast<int>(ms);
    auto until = [now](absl::Time t) {
      return std::max<int64_t>(0, absl::ToInt64Milliseconds(t - now) + 1);
    };
    for (const auto& j : waiting_) {
      ms = std::min<int64_t>(ms, until(j->deadline));
      if (j->path != nullptr && j->path->running >= j->path->limit.limit()) continue;
      ms = std::min<int64_t>(ms, until(j->not_before));
    }
    return static_cast<int>(ms);
  }

  void Run() {
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        for (auto& j : incoming_) {
          ++PathOf(j.get())->waiting;
          waiting_.push_back(std::move(j));
        }
        incoming_.clear();
        if (stop_) break;
      }
      EndCancelled();
      StartDue(absl::Now());
      int still = 0;
      curl_multi_perform(multi_, &still);
      int queued = 0;
      while (CURLMsg* m = curl_multi_info_read(multi_, &queued)) {
        if (m->msg != CURLMSG_DONE) continue;
        Job* job = nullptr;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&job));
        const CURLcode code = m->data.result;
        Finish(job, code);
      }
      StartDue(absl::Now());
      curl_multi_poll(multi_, nullptr, 0, WaitMs(absl::Now()), nullptr);
    }
    // Shutting down: everything left is cancelled.
    std::vector<std::unique_ptr<Job>> left;
    for (auto& [raw, job] : running_) {
      Release(raw);
      left.push_back(std::move(job));
    }
    running_.clear();
    for (auto& j : waiting_) left.push_back(std::move(j));
    waiting_.clear();
    for (auto& j : left) Fail(std::move(j), absl::CancelledError("object store client stopped"));
  }

  const Options options_;
  const AttemptOptions attempt_options_{options_.max_reply_bytes, options_.ca_file,
                                        options_.connect_timeout, options_.low_speed_bytes,
                                        options_.low_speed_time};
  CURLM* multi_ = nullptr;
  std::thread thread_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Job>> incoming_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // The event thread's own.
  std::deque<std::unique_ptr<Job>> waiting_;
  std::map<Job*, std::unique_ptr<Job>> running_;
  std::map<std::string, Path> paths_;  // By endpoint, owner and identity.
  // When each owner last had a request started (turn_'s value then).
  std::map<int64_t, uint64_t> turns_;
  uint64_t turn_ = 0;
  std::mt19937_64 rng_{std::random_device{}()};
  std::atomic<uint64_t> requests_{0}, retries_{0}, failures_{0}, bytes_{0}, throttles_{0};
  std::atomic<int> limit_now_{0};
};

absl::StatusOr<std::unique_ptr<S3Client>> S3Client::Create(Options options) {
  if (options.min_in_flight < 1 || options.max_in_flight < options.min_in_flight ||
      options.max_attempts < 1) {
    return absl::InvalidArgumentError(
        "object store client: need 1 <= min_in_flight <= max_in_flight and max_attempts >= 1");
  }
  if (options.deadline <= absl::ZeroDuration() ||
      (options.low_speed_bytes > 0 && options.low_speed_time < absl::Seconds(1))) {
    return absl::InvalidArgumentError(
        "object store client: the deadline must be positive, and the low speed time at "
        "least 1s where a low speed is set");
  }
  curl_version_info_data* v = curl_version_info(CURLVERSION_NOW);
  if (v == nullptr || v->version_num < 0x075500) {  // CURLOPT_PROTOCOLS_STR: 7.85.
    return absl::FailedPreconditionError("object store client: libcurl 7.85 or later needed");
  }
  return std::unique_ptr<S3Client>(new S3Client(std::make_unique<Loop>(std::move(options))));
}

S3Client::S3Client(std::unique_ptr<Loop> loop) : loop_(std::move(loop)) {}
S3Client::~S3Client() = default;

void S3Client::Start(S3Request r, std::function<void(S3Reply)> done) {
  absl::Status refused = loop_->options().endpoints.Check(r.endpoint, /*admin=*/r.owner < 0);
  if (refused.ok()) refused = CheckRequest(r);
  if (refused.ok() && Cancelled(r)) refused = CancelledStatus(r);
  // Signed once, on the caller's thread: a caller's client that is slow to
  // sign holds its own reader, never the event thread.
  if (refused.ok()) refused = SignRequest(&r, absl::Now());
  if (!refused.ok()) {
    S3Reply reply;
    reply.status = std::move(refused);
    done(std::move(reply));
    return;
  }
  loop_->Submit(std::move(r), std::move(done));
}

S3Reply S3Client::Run(S3Request r, const std::function<bool()>& stop) {
  if (loop_->OnEventThread()) {
    S3Reply out;
    out.status = absl::FailedPreconditionError(
        "object store client: a blocking call from its own event thread (a callback)");
    return out;
  }
  // Shared with the callback, which may come after a caller that stopped.
  struct Wait {
    absl::Notification got;
    S3Reply reply;
  };
  auto once = [this, &stop](S3Request req) {
    auto wait = std::make_shared<Wait>();
    Start(std::move(req), [wait](S3Reply reply) {
      wait->reply = std::move(reply);
      wait->got.Notify();
    });
    if (!stop) {
      wait->got.WaitForNotification();
      return std::move(wait->reply);
    }
    while (!wait->got.WaitForNotificationWithTimeout(absl::Milliseconds(50))) {
      if (stop()) {
        S3Reply out;
        out.status = absl::CancelledError("the request's reader stopped");
        return out;
      }
    }
    return std::move(wait->reply);
  };
  // A request its caller's client signs is signed once more, and sent
  // again, if the store finds its token expired: the client had its
  // credentials refreshed while the request waited or ran.
  std::optional<S3Request> again;
  if (r.credentials != nullptr && r.credentials->remote != nullptr) again = r;
  S3Reply reply = once(std::move(r));
  if (again.has_value() && reply.expired_token) reply = once(*std::move(again));
  return reply;
}

absl::StatusOr<ObjectVersion> S3Client::Head(const Endpoint& e, const S3Url& object,
                                             std::shared_ptr<const S3Credentials> c,
                                             const std::string& if_match, int64_t owner,
                                             std::shared_ptr<const Cancellation> cancel) {
  S3Request r;
  r.method = S3Request::Method::kHead;
  r.if_match = if_match;
  r.endpoint = e;
  r.bucket = object.bucket;
  r.key = object.key;
  r.credentials = std::move(c);
  r.owner = owner;
  r.cancel = std::move(cancel);
  S3Reply reply = Run(std::move(r));
  if (!reply.status.ok()) return reply.status;
  return reply.version;
}

absl::Status S3Client::Get(const Endpoint& e, const S3Url& object, uint64_t offset,
                           uint64_t length, const std::string& if_match,
                           std::shared_ptr<const S3Credentials> c, std::string* out,
                           ObjectVersion* seen, int64_t owner,
                           const std::function<bool()>& stop,
                           std::shared_ptr<const Cancellation> cancel) {
  S3Request r;
  r.endpoint = e;
  r.bucket = object.bucket;
  r.key = object.key;
  r.offset = offset;
  r.length = length;
  r.if_match = if_match;
  r.credentials = std::move(c);
  r.owner = owner;
  r.cancel = std::move(cancel);
  S3Reply reply = Run(std::move(r), stop);
  if (!reply.status.ok()) return reply.status;
  *out = std::move(reply.body);
  if (seen != nullptr) *seen = reply.version;
  return absl::OkStatus();
}

absl::StatusOr<ListPage> S3Client::List(const Endpoint& e, const std::string& bucket,
                                        const std::string& prefix, const std::string& delimiter,
                                        const std::string& token,
                                        std::shared_ptr<const S3Credentials> c, int max_keys,
                                        int64_t owner, const std::function<bool()>& stop,
                                        std::shared_ptr<const Cancellation> cancel) {
  S3Request r;
  r.endpoint = e;
  r.bucket = bucket;
  r.query = {{"list-type", "2"}, {"prefix", prefix}};
  if (!delimiter.empty()) r.query.emplace_back("delimiter", delimiter);
  if (!token.empty()) r.query.emplace_back("continuation-token", token);
  if (max_keys > 0) r.query.emplace_back("max-keys", std::to_string(max_keys));
  r.credentials = std::move(c);
  r.owner = owner;
  r.cancel = std::move(cancel);
  S3Reply reply = Run(std::move(r), stop);
  if (!reply.status.ok()) return reply.status;
  absl::StatusOr<ListPage> page = ParseListPage(reply.body);
  if (!page.ok()) {
    return absl::DataLossError(absl::StrCat("listing s3://", bucket, "/", prefix, " at ",
                                            e.ToString(), ": ", page.status().message()));
  }
  return page;
}

S3Client::Stats S3Client::stats() const { return loop_->stats(); }

}  // namespace stoker
