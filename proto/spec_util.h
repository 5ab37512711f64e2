// Small facts about a SessionSpec that both the client and the daemon need,
// written once. Stateless; thread-safe.
#ifndef STOKER_PROTO_SPEC_UTIL_H_
#define STOKER_PROTO_SPEC_UTIL_H_

#include <sys/stat.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "proto/stoker.pb.h"
#include "shm/ring_data.h"

namespace stoker {

// A shard member's name as FieldSpec.member and WebDatasetSource.members
// take it: 1 to 32 of a-z 0-9 . _ - (WebDataset lower-cases extensions),
// and at most kMaxKeptMembers of them per source.
inline constexpr size_t kMaxKeptMembers = 6;
inline bool IsMemberName(const std::string& name) {
  return !name.empty() && name.size() <= 32 &&
         name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789._-") == std::string::npos;
}

// The SlabMemory kind (shm/cuda_slabs.h's SlabMemoryOfKind) a session's
// slabs are of, and the GPU they are on ("" for host memory).
inline const char* SlabKind(const v1::SessionSpec& spec) {
  return spec.slabs().memory() == v1::BatchSlabs::MEMORY_CUDA ? "cuda" : "host";
}
inline std::string SlabGpu(const v1::SessionSpec& spec) {
  return spec.slabs().memory() == v1::BatchSlabs::MEMORY_CUDA ? spec.placement().gpu_bus_id()
                                                               : std::string();
}

// The source message the dataset names (its `source` oneof case), or null
// when none is set. A local source's message has a string `path` (the file
// or folder it reads) and may have a string `root` (the folder its files
// are relative to); an object store's has a `url` instead, and may have a
// `manifest` (a local file, or another URL): the generic helpers below
// read those, never the kind.
inline const google::protobuf::Message* DatasetSource(const v1::DatasetSpec& ds) {
  const google::protobuf::FieldDescriptor* f =
      ds.GetDescriptor()->FindFieldByNumber(ds.source_case());
  return f == nullptr ? nullptr : &ds.GetReflection()->GetMessage(ds, f);
}

// The source message's string field `name`; empty when it has none.
inline std::string SourceField(const google::protobuf::Message& source, const char* name) {
  const google::protobuf::FieldDescriptor* f = source.GetDescriptor()->FindFieldByName(name);
  return f == nullptr || f->type() != google::protobuf::FieldDescriptor::TYPE_STRING
             ? std::string()
             : source.GetReflection()->GetString(source, f);
}

// The local path the dataset's source names (a folder, manifest, LMDB
// environment, array file...; an object store source's local manifest);
// empty when no source is set, or it names none.
inline std::string DatasetPath(const v1::DatasetSpec& ds) {
  const google::protobuf::Message* source = DatasetSource(ds);
  if (source == nullptr) return std::string();
  if (source->GetDescriptor()->FindFieldByName("path") != nullptr) {
    return SourceField(*source, "path");
  }
  const std::string manifest = SourceField(*source, "manifest");
  return manifest.rfind("s3://", 0) == 0 ? std::string() : manifest;
}

// Whether the dataset's source kind reads a remote store (the schema's
// `remote` option on its message).
inline bool IsRemoteSource(const v1::DatasetSpec& ds) {
  const google::protobuf::Message* source = DatasetSource(ds);
  return source != nullptr && source->GetDescriptor()->options().GetExtension(v1::remote);
}

// What the dataset's source reads, by the field that names it: its local
// `path`, else its object store `url`; with that field's name.
inline std::pair<std::string, const char*> DatasetLocation(const v1::DatasetSpec& ds) {
  const google::protobuf::Message* source = DatasetSource(ds);
  if (source == nullptr) return {"", "path"};
  if (source->GetDescriptor()->FindFieldByName("path") != nullptr) {
    return {SourceField(*source, "path"), "path"};
  }
  return {SourceField(*source, "url"), "url"};
}

// The source kinds the schema names: DatasetSpec's `source` cases, in its
// order ("folder", "list", ...). Every list of kinds is made from this.
inline std::vector<std::string> DatasetSourceKinds() {
  const google::protobuf::OneofDescriptor* o =
      v1::DatasetSpec::descriptor()->FindOneofByName("source");
  std::vector<std::string> out;
  for (int i = 0; i < o->field_count(); ++i) out.push_back(o->field(i)->name());
  return out;
}

// "folder, list, ..., s3 or raw": the kinds, as errors name them.
inline std::string DatasetSourceNames() {
  const std::vector<std::string> kinds = DatasetSourceKinds();
  std::string out;
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (i > 0) out += i + 1 == kinds.size() ? " or " : ", ";
    out += kinds[i];
  }
  return out;
}

// "decode" or, for one NUMA node's decode pool, "decode@1": how people
// name a pool.
inline std::string PoolLabel(const v1::PoolStats& p) {
  return p.has_node() ? p.pool() + "@" + std::to_string(p.node()) : p.pool();
}

// An enum value's name without `prefix`, in lower case with dashes.
inline std::string LowerName(std::string name, const std::string& prefix) {
  if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  for (char& c : name) {
    c = c == '_' ? '-' : (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return name;
}

// "decode-bound" for DIAGNOSIS_DECODE_BOUND: how people, logs and metric
// labels name a diagnosis.
inline std::string DiagnosisName(v1::Diagnosis d) {
  return LowerName(v1::Diagnosis_Name(d), "DIAGNOSIS_");
}

// "kept" for PIXEL_MODE_KEPT, "not-kept", "partly-kept", ...
inline std::string PixelModeName(v1::PixelMode m) {
  return LowerName(v1::PixelMode_Name(m), "PIXEL_MODE_");
}

// The ring's dtype code (shm/ring_data.h's table) of a proto DType, and
// back: the table's codes are the proto's numbers + 1 (spec_util_test
// checks every row against the proto's names).
inline uint32_t RingDType(v1::DType dtype) {
  return static_cast<uint32_t>(dtype) + 1;
}
inline v1::DType ProtoDType(uint32_t ring_dtype) {
  return static_cast<v1::DType>(ring_dtype - 1);
}

// "float32": the table's name of a ring dtype code; "unknown" for none.
inline const char* DTypeName(uint32_t ring_dtype) {
  const shm::DTypeInfo* d = shm::FindDType(ring_dtype);
  return d == nullptr ? "unknown" : d->name;
}

// The most pixels of a picture's side any spec takes: image and mask
// fields, the ops' output sizes, the pixel cache's max_side.
inline constexpr uint32_t kMaxSide = 16384;

// "float32/float16/bfloat16": the table's float field dtypes.
inline const std::string& FloatDTypeNames() {
  static const std::string* names = [] {
    std::vector<const shm::DTypeInfo*> floats;  // By ring code.
    for (const shm::DTypeInfo& d : shm::kElemTypes) {
      if (d.is_field() && d.is_float()) floats.push_back(&d);
    }
    std::sort(floats.begin(), floats.end(),
              [](const shm::DTypeInfo* a, const shm::DTypeInfo* b) { return a->code < b->code; });
    auto* out = new std::string;
    for (const shm::DTypeInfo* d : floats) absl::StrAppend(out, out->empty() ? "" : "/", d->name);
    return out;
  }();
  return *names;
}

// Whether an image field (or the presets' image) may have `dtype`: uint8
// pixels, or any float dtype (normalized values).
inline bool ImageDTypeOk(v1::DType dtype) {
  return dtype == v1::DTYPE_UINT8 || shm::DTypeIsFloat(RingDType(dtype));
}
inline std::string ImageDTypeNames() { return "uint8 or " + FloatDTypeNames(); }

// True when `path` names something other than a folder (following
// symlinks): a file, or a FIFO or device the daemon will refuse.
inline bool DatasetIsFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
}

// The folder a dataset lives in, as its spec names it (no trailing '/'):
// the source's `root` when it has one, else the folder `path` is in when
// it is a file (a manifest, an .npy or HDF5 file, an LMDB data file; or a
// FIFO, which the daemon then refuses; an object store's local manifest,
// always, so the daemon need not stat it), else `path` itself (an image
// folder, an LMDB environment, a folder of arrays; a path that does not
// exist, which proving then names). A client proves it can open this
// folder, and a non-admin's dataset is read only beneath it.
inline std::string DatasetFolder(const v1::DatasetSpec& ds) {
  const google::protobuf::Message* source = DatasetSource(ds);
  std::string dir = source == nullptr ? std::string() : SourceField(*source, "root");
  // An object store's local manifest is a file, whatever stat says.
  const bool file = source != nullptr &&
                    source->GetDescriptor()->FindFieldByName("path") == nullptr;
  if (dir.empty()) {
    dir = DatasetPath(ds);
    if (dir.size() > 1 && dir.back() != '/' && (file || DatasetIsFile(dir))) {
      const size_t slash = dir.rfind('/');
      dir = slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash);
    }
  }
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

}  // namespace stoker

#endif  // STOKER_PROTO_SPEC_UTIL_H_
