#include "server/access/call_budget.h"

#include "absl/strings/str_cat.h"

namespace stoker {

absl::Status CallBudget::Acquire(int64_t uid) {
  absl::MutexLock lock(&mu_);
  int& mine = per_uid_[uid];
  if (mine >= per_user_ || in_flight_ >= total_) {
    const bool user = mine >= per_user_;
    if (mine == 0) per_uid_.erase(uid);
    return absl::ResourceExhaustedError(absl::StrCat(
        user ? absl::StrCat("uid ", uid, " already has ", per_user_)
             : absl::StrCat("the daemon already has ", total_),
        " session opens or cache warms in flight; try again when one has finished"));
  }
  ++mine;
  ++in_flight_;
  return absl::OkStatus();
}

void CallBudget::Release(int64_t uid) {
  absl::MutexLock lock(&mu_);
  auto it = per_uid_.find(uid);
  if (it == per_uid_.end()) return;
  if (--it->second == 0) per_uid_.erase(it);
  --in_flight_;
}

int CallBudget::in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

}  // namespace stoker
