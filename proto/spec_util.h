// Small facts about a SessionSpec that both the client and the daemon need,
// written once. Stateless; thread-safe.
#ifndef STOKER_PROTO_SPEC_UTIL_H_
#define STOKER_PROTO_SPEC_UTIL_H_

#include <string>

#include "proto/stoker.pb.h"

namespace stoker {

// The folder a dataset lives in, as its spec names it (no trailing '/'):
// the folder itself, the LMDB environment, or for a manifest its `root`
// (default: the manifest's own folder). A client proves it can open this
// folder, and a non-admin's dataset is read only beneath it.
inline std::string DatasetFolder(const v1::DatasetSpec& ds) {
  std::string dir = ds.path();
  if (ds.kind() == v1::DatasetSpec::LIST) {
    if (!ds.root().empty()) {
      dir = ds.root();
    } else {
      const size_t slash = dir.rfind('/');
      dir = slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash);
    }
  }
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

}  // namespace stoker

#endif  // STOKER_PROTO_SPEC_UTIL_H_
