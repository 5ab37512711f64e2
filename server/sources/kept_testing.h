// An in-memory KeptValues for the object store kinds' tests: what is kept,
// and whose. Thread-safe (kinds index shards at once).
#ifndef STOKER_SERVER_SOURCES_KEPT_TESTING_H_
#define STOKER_SERVER_SOURCES_KEPT_TESTING_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "server/sources/source.h"

namespace stoker {

class MemoryKept : public KeptValues {
 public:
  bool Get(const std::string& key,
           const std::function<void(absl::string_view value)>& take) override {
    absl::MutexLock lock(&mu);
    auto it = values.find(key);
    if (it == values.end()) return false;
    take(it->second);
    return true;
  }
  void Put(const std::string& key, std::string value, int64_t owner) override {
    absl::MutexLock lock(&mu);
    values[key] = std::move(value);
    owners.push_back(owner);
  }
  absl::Mutex mu;
  std::map<std::string, std::string> values;
  std::vector<int64_t> owners;
};

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_KEPT_TESTING_H_
