// The live objects something must reach all at once later (every
// session's reads to cancel, every opener channel to cut when the daemon
// stops), held without keeping them alive. Add drops the references that
// expired whenever the list would grow, so it holds at most twice the
// objects alive at its last growth; TakeLive hands over those still alive
// and empties it. Not thread-safe: its owner's mutex guards it.
#ifndef STOKER_UTIL_WEAK_LIST_H_
#define STOKER_UTIL_WEAK_LIST_H_

#include <algorithm>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace stoker {

template <typename T>
class WeakList {
 public:
  void Add(std::weak_ptr<T> item) {
    if (items_.size() == items_.capacity()) {  // Those gone go first.
      items_.erase(std::remove_if(items_.begin(), items_.end(),
                                  [](const std::weak_ptr<T>& w) { return w.expired(); }),
                   items_.end());
    }
    items_.push_back(std::move(item));
  }

  // Those still alive, in the order added; the list is left empty.
  std::vector<std::shared_ptr<T>> TakeLive() {
    std::vector<std::shared_ptr<T>> live;
    for (const std::weak_ptr<T>& w : items_) {
      if (std::shared_ptr<T> item = w.lock()) live.push_back(std::move(item));
    }
    items_.clear();
    return live;
  }

  // References held, expired or not.
  size_t size() const { return items_.size(); }

 private:
  std::vector<std::weak_ptr<T>> items_;
};

}  // namespace stoker

#endif  // STOKER_UTIL_WEAK_LIST_H_
