// Small facts about a SessionSpec that both the client and the daemon need,
// written once. Stateless; thread-safe.
#ifndef STOKER_PROTO_SPEC_UTIL_H_
#define STOKER_PROTO_SPEC_UTIL_H_

#include <sys/stat.h>

#include <string>

#include "proto/stoker.pb.h"

namespace stoker {

// The path the dataset's source names (folder, manifest or LMDB
// environment); empty when no source is set.
inline const std::string& DatasetPath(const v1::DatasetSpec& ds) {
  switch (ds.source_case()) {
    case v1::DatasetSpec::kFolder: return ds.folder().path();
    case v1::DatasetSpec::kList: return ds.list().path();
    case v1::DatasetSpec::kLmdb: return ds.lmdb().path();
    case v1::DatasetSpec::kNpy: return ds.npy().path();
    case v1::DatasetSpec::kHdf5: return ds.hdf5().path();
    default: return ds.folder().path();  // The empty default instance's.
  }
}

// "decode" or, for one NUMA node's decode pool, "decode@1": how people
// name a pool.
inline std::string PoolLabel(const v1::PoolStats& p) {
  return p.has_node() ? p.pool() + "@" + std::to_string(p.node()) : p.pool();
}

// "decode-bound" for DIAGNOSIS_DECODE_BOUND: how people, logs and metric
// labels name a diagnosis.
inline std::string DiagnosisName(v1::Diagnosis d) {
  std::string name = v1::Diagnosis_Name(d);
  if (name.rfind("DIAGNOSIS_", 0) == 0) name = name.substr(10);
  for (char& c : name) {
    c = c == '_' ? '-' : (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return name;
}

// The ring's dtype code (shm/ring_data.h) of a proto DType.
inline uint32_t RingDType(v1::DType dtype) {
  return static_cast<uint32_t>(dtype) + 1;
}

// True when `path` is a regular file (an npy/HDF5 source may name a file
// or a folder).
inline bool DatasetIsFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The folder a dataset lives in, as its spec names it (no trailing '/'):
// the folder itself, the LMDB environment, for a manifest its `root`
// (default: the manifest's own folder), for an npy/HDF5 file its folder.
// A client proves it can open this folder, and a non-admin's dataset is
// read only beneath it.
inline std::string DatasetFolder(const v1::DatasetSpec& ds) {
  std::string dir = DatasetPath(ds);
  const bool file = (ds.has_npy() || ds.has_hdf5()) && dir.size() > 1 &&
                    dir.back() != '/' && DatasetIsFile(dir);
  if (ds.has_list() || file) {
    if (ds.has_list() && !ds.list().root().empty()) {
      dir = ds.list().root();
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
