#include "server/daemon/openings.h"

#include <utility>

#include "absl/strings/escaping.h"

namespace stoker {

std::shared_ptr<OpeningProgress> Openings::Begin(int64_t uid, uint32_t pid,
                                                 std::string dataset) {
  // A name is the caller's text: a terminal or a log shows it as it is.
  if (dataset.size() > 256) dataset.resize(256);
  dataset = absl::CHexEscape(dataset);
  auto* progress = new OpeningProgress();
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    id = next_++;
    open_.emplace(id, Entry{uid, pid, std::move(dataset), progress});
  }
  // Unlisted before it is freed: stats read it under the lock.
  return std::shared_ptr<OpeningProgress>(progress, [this, id](OpeningProgress* p) {
    {
      absl::MutexLock lock(&mu_);
      open_.erase(id);
    }
    delete p;
  });
}

void Openings::AddStats(v1::DaemonStats* s, int64_t viewer_uid, bool admin) const {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  for (const auto& [id, e] : open_) {
    const bool own = admin || e.uid == viewer_uid;
    const std::string name = own ? e.dataset : std::string("(another user's dataset)");
    const OpeningProgress::View v = e.progress->Now(now);
    v1::Opening* o = s->add_openings();
    o->set_uid(static_cast<uint32_t>(e.uid));
    o->set_pid(own ? e.pid : 0);
    o->set_dataset(name);
    o->set_seconds(absl::ToDoubleSeconds(v.elapsed));
    o->set_listed(v.listed);
    o->set_shards(v.shards);
    o->set_shards_done(v.shards_done);
    o->set_bytes(v.bytes);
    o->set_bytes_read(v.bytes_read);
    if (v.left != absl::InfiniteDuration()) o->set_seconds_left(absl::ToDoubleSeconds(v.left));
    o->set_summary(e.progress->Summary(name, now));
  }
}

}  // namespace stoker
