#include "server/daemon/openings.h"

#include <utility>

namespace stoker {

std::shared_ptr<OpeningProgress> Openings::Begin(int64_t uid, std::string dataset) {
  auto* progress = new OpeningProgress();
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    id = next_++;
    open_.emplace(id, Entry{uid, std::move(dataset), progress});
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
    const std::string name =
        admin || e.uid == viewer_uid ? e.dataset : std::string("(another user's dataset)");
    const OpeningProgress::View v = e.progress->Now(now);
    v1::Opening* o = s->add_openings();
    o->set_uid(static_cast<uint32_t>(e.uid));
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
